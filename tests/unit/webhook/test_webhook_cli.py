"""`karpy webhook`: flag checking, and a real gunicorn serving HTTPS with a self-signed cert on loopback."""

from __future__ import annotations

import json
import socket
import ssl
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from extender.cli.main import main
from extender.cli.webhook import local_command
from tests.unit.webhook.reviews import pod_manifest, pod_review

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "choose exactly one of --tls-cert/--tls-key, --self-signed, --insecure-http"),
        (["--self-signed", "--insecure-http"], "choose exactly one"),
        (
            ["--tls-cert", "/nonexistent.pem", "--tls-key", "/nonexistent.key"],
            "no such file: /nonexistent.pem",
        ),
        (["--tls-cert", "/x.pem"], "--tls-cert and --tls-key go together"),
        (["--bind", "8443", "--insecure-http"], "--bind wants HOST:PORT"),
    ],
)
def test_usage_errors_exit_2_with_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["webhook", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("karpy webhook: ") and message in err and err.count("\n") == 1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_serves_https_with_self_signed_cert(tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(
        local_command(port=port, cert_dir=tmp_path, extra=[f"--kubeconfig={tmp_path / 'absent'}"]),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                context = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
                with urllib.request.urlopen(
                    f"https://127.0.0.1:{port}/healthz", context=context, timeout=2
                ) as r:
                    assert r.read() == b"ok\n"
                break
            except (OSError, ssl.SSLError):
                assert proc.poll() is None and time.monotonic() < deadline, "webhook did not come up"
                time.sleep(0.2)
        body = json.dumps(pod_review(pod_manifest())).encode()
        request = urllib.request.Request(
            f"https://127.0.0.1:{port}/mutate/pod?timeout=3s",
            data=body,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, context=context, timeout=5) as r:
            response = json.loads(r.read())["response"]
        # No readable kubeconfig: the Provisioner list fails and the pod is admitted unchanged
        # with a warning (issue 13, Found 7: it used to be pinned to `default` for good).
        assert response["allowed"] is True and "patchType" not in response
        assert "could not be listed" in response["warnings"][0]
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=15)
    assert proc.returncode == 0, out.decode()
