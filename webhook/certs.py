"""Self-signed TLS for the webhook: a CA, a serving certificate for the Service names, and caBundle patching.

With several replicas every one must serve a certificate from the same CA, so the pair is shared
through a Secret (first replica creates it, the others read it), as Karpenter's webhook does: the
Secret and rotation before expiry, without a restart, are webhook/rotation.py, which builds on this
module (never the other way round).
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_KEY, CERT_KEY, KEY_KEY = "ca.crt", "tls.crt", "tls.key"


@dataclass(frozen=True)
class ServingCert:
    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes

    def write(self, directory: Path) -> tuple[Path, Path, Path]:
        """Write ca.crt, tls.crt and tls.key (0600) into `directory`; returns their paths."""
        directory.mkdir(parents=True, exist_ok=True)
        paths = []
        for name, data in ((CA_KEY, self.ca_pem), (CERT_KEY, self.cert_pem), (KEY_KEY, self.key_pem)):
            path = directory / name
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            paths.append(path)
        return paths[0], paths[1], paths[2]


def service_hosts(service: str, namespace: str) -> list[str]:
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _san(hosts: Iterable[str]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for host in dict.fromkeys(hosts):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(names)


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def generate(hosts: Sequence[str], *, days: float = 365, now: datetime.datetime | None = None) -> ServingCert:
    """A fresh CA and a serving certificate signed by it whose SANs are `hosts` (DNS names or IPs).
    One year by default: webhook/rotation.py replaces the pair at 2/3 of its life."""
    if not hosts:
        raise ValueError("a serving certificate needs at least one host")
    now = now or datetime.datetime.now(datetime.UTC)
    validity = datetime.timedelta(days=days)
    # Backdated for clock skew between replicas and the API server, by at most a tenth of its life.
    start, end = now - min(datetime.timedelta(minutes=5), validity / 10), now + validity
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(_name("karpy-webhook-ca"))
        .issuer_name(_name("karpy-webhook-ca"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(hosts[0]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        # Go refuses CN-only certificates: the names must be SANs.
        .add_extension(_san(hosts), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return ServingCert(
        ca_pem=ca_cert.public_bytes(serialization.Encoding.PEM),
        cert_pem=cert.public_bytes(serialization.Encoding.PEM),
        key_pem=_pem_key(key),
    )


def ca_bundle_patch(webhook_count: int, ca_pem: bytes) -> list[dict[str, Any]]:
    """JSON Patch setting clientConfig.caBundle on every webhook of a webhook configuration."""
    bundle = base64.b64encode(ca_pem).decode("ascii")
    return [
        {"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": bundle}
        for i in range(webhook_count)
    ]


def patch_ca_bundles(
    api_client: Any, ca_pem: bytes, *, mutating: Sequence[str], validating: Sequence[str]
) -> None:
    """Put the CA into the named webhook configurations so the API server trusts the serving cert."""
    from kubernetes import client

    api = client.AdmissionregistrationV1Api(api_client)
    targets = [
        (name, api.read_mutating_webhook_configuration, api.patch_mutating_webhook_configuration)
        for name in mutating
    ] + [
        (name, api.read_validating_webhook_configuration, api.patch_validating_webhook_configuration)
        for name in validating
    ]
    for name, read, patch in targets:
        ops = ca_bundle_patch(len(read(name).webhooks or []), ca_pem)
        if ops:
            patch(name, ops, _content_type="application/json-patch+json")
