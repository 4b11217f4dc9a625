"""Self-signed CA + serving certificate: SANs, chain, key usage, caBundle patch."""

from __future__ import annotations

import base64
import datetime
import ipaddress
import ssl
import stat
from pathlib import Path

from cryptography import x509

from webhook.certs import ca_bundle_patch, generate, service_hosts


def test_serving_cert_has_service_and_ip_sans_and_chains_to_ca(tmp_path: Path) -> None:
    hosts = [*service_hosts("karpy-webhook", "karpy"), "127.0.0.1", "localhost"]
    pair = generate(hosts)
    cert = x509.load_pem_x509_certificate(pair.cert_pem)
    ca = x509.load_pem_x509_certificate(pair.ca_pem)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == [
        "karpy-webhook",
        "karpy-webhook.karpy",
        "karpy-webhook.karpy.svc",
        "karpy-webhook.karpy.svc.cluster.local",
        "localhost",
    ]
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    cert.verify_directly_issued_by(ca)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    # One year, rotated at 2/3 of it (webhook/rotation.py); it was 10 years, never rotated.
    life = cert.not_valid_after_utc - datetime.datetime.now(datetime.UTC)
    assert datetime.timedelta(days=364) < life <= datetime.timedelta(days=365)

    ca_path, cert_path, key_path = pair.write(tmp_path / "certs")
    assert stat.S_IMODE(key_path.stat().st_mode) == 0o600
    # The standard library accepts the pair as a server certificate and the CA as its trust root.
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert_path, key_path)
    client = ssl.create_default_context(cafile=str(ca_path))
    assert client.cert_store_stats()["x509_ca"] == 1


def test_ca_bundle_patch_covers_every_webhook() -> None:
    ops = ca_bundle_patch(2, b"PEM")
    assert ops == [
        {
            "op": "add",
            "path": f"/webhooks/{i}/clientConfig/caBundle",
            "value": base64.b64encode(b"PEM").decode(),
        }
        for i in (0, 1)
    ]
    assert ca_bundle_patch(0, b"PEM") == []
