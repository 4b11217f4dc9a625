"""`karpy webhook` as a real gunicorn process on loopback: HTTPS with a self-signed certificate,
and rotation of that certificate without a restart (the rotation's logic, on an injected clock:
tests/unit/webhook/test_webhook_rotation.py)."""

from __future__ import annotations

import json
import socket
import ssl
import time
import urllib.request
from pathlib import Path

from cryptography import x509

from tests.process.webhook.local import local_webhook
from tests.unit.webhook.reviews import pod_manifest, pod_review


def test_serves_https_with_self_signed_cert(tmp_path: Path) -> None:
    with local_webhook(tmp_path, capture=True) as server:
        context = server.context()
        with urllib.request.urlopen(
            f"https://127.0.0.1:{server.port}/healthz", context=context, timeout=2
        ) as r:
            assert r.read() == b"ok\n"
        body = json.dumps(pod_review(pod_manifest())).encode()
        request = urllib.request.Request(
            f"https://127.0.0.1:{server.port}/mutate/pod?timeout=3s",
            data=body,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, context=context, timeout=5) as r:
            response = json.loads(r.read())["response"]
        # No readable kubeconfig: the Provisioner list fails and the pod is admitted unchanged
        # with a warning (issue 13, Found 7: it used to be pinned to `default` for good).
        assert response["allowed"] is True and "patchType" not in response
        assert "could not be listed" in response["warnings"][0]
    assert server.process.returncode == 0, server.output()


def _served_serial(port: int, ca: Path) -> int:
    context = ssl.create_default_context(cafile=str(ca))
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def test_running_webhook_serves_the_rotated_certificate_without_a_restart(tmp_path: Path) -> None:
    """16 s validity checked every second: rotated at ~11 s, served from the next connection on."""
    with local_webhook(tmp_path, ["--cert-days=0.000185", "--cert-check-seconds=1"], capture=True) as server:
        first = _served_serial(server.port, tmp_path / "ca.crt")
        deadline = time.monotonic() + 30
        serial = first
        while serial == first and time.monotonic() < deadline:
            time.sleep(0.5)
            serial = _served_serial(server.port, tmp_path / "ca.crt")  # the bundle on disk trusts both
        assert serial != first, "no rotation within 30 s"
        assert server.process.poll() is None  # same process: no restart
        assert len(x509.load_pem_x509_certificates((tmp_path / "ca.crt").read_bytes())) >= 2
    out = server.output()
    assert "Rotated the webhook certificate" in out, out[-2000:]
