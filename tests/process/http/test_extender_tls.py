"""The extender over TLS (issue 13, "optionally TLS for the extender"): a real gunicorn server with the
controller's options and a certificate; the metrics port stays plain HTTP.

kube-scheduler calling it through `enableHTTPS` + `tlsConfig.caFile` is proven on the local control
plane in tests/integration/test_extender_tls.py.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from extender.cli.controller import settings_from
from extender.cli.main import UsageError
from hack.localcluster import pki
from hack.localcluster.procs import free_port
from tests.process.http import slowserver


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> pki.Pki:
    return pki.create(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def server(certs: pki.Pki) -> Iterator[tuple[int, int]]:
    port, metrics_port = free_port(), free_port()

    def up() -> bool:
        try:
            return requests.get(f"https://127.0.0.1:{port}/healthz", timeout=1, verify=str(certs.ca_cert)).ok
        except requests.RequestException:
            return False

    args = [str(port), str(metrics_port), "bounded", str(certs.serving_cert), str(certs.serving_key)]
    with slowserver.running(args, up):
        yield port, metrics_port


def test_extender_answers_https_verified_by_the_issuing_ca(server: tuple[int, int], certs: pki.Pki) -> None:
    port, _ = server
    reply = requests.post(
        f"https://127.0.0.1:{port}/filter",
        json={"Pod": {"metadata": {"name": "p", "namespace": "ns", "uid": "u"}}, "NodeNames": ["n1"]},
        timeout=5,
        verify=str(certs.ca_cert),
    )
    assert reply.status_code == 200
    assert reply.json()["NodeNames"] == ["n1"]


def test_plain_http_to_the_tls_port_gets_no_answer(server: tuple[int, int]) -> None:
    port, _ = server
    with pytest.raises(requests.RequestException):
        requests.get(f"http://127.0.0.1:{port}/healthz", timeout=5)


def test_a_client_that_does_not_trust_the_ca_is_refused(server: tuple[int, int]) -> None:
    port, _ = server
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(f"https://127.0.0.1:{port}/healthz", timeout=5, verify=True)


def test_metrics_port_stays_plain_http(server: tuple[int, int], certs: pki.Pki) -> None:
    _, metrics_port = server
    reply = requests.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5)
    assert reply.status_code == 200 and "karpy_" in reply.text
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(f"https://127.0.0.1:{metrics_port}/metrics", timeout=5, verify=str(certs.ca_cert))


def _args(**flags: str) -> argparse.Namespace:
    return argparse.Namespace(**flags)


def test_cert_without_key_is_a_usage_error(certs: pki.Pki) -> None:
    with pytest.raises(UsageError, match="both the certificate and the key"):
        settings_from(_args(tls_cert=str(certs.serving_cert)), env={})


def test_unreadable_cert_is_a_usage_error(tmp_path: Path, certs: pki.Pki) -> None:
    with pytest.raises(UsageError, match="cannot load"):
        settings_from(_args(tls_cert=str(tmp_path / "missing.pem"), tls_key=str(certs.serving_key)), env={})


def test_cert_and_key_from_flags_or_env(certs: pki.Pki) -> None:
    settings = settings_from(_args(tls_cert=str(certs.serving_cert), tls_key=str(certs.serving_key)), env={})
    assert settings.extender.tls_cert_file == str(certs.serving_cert)
    env = {
        "KARPY_EXTENDER_TLS_CERT_FILE": str(certs.serving_cert),
        "KARPY_EXTENDER_TLS_KEY_FILE": str(certs.serving_key),
    }
    assert settings_from(_args(), env=env).extender.tls_key_file == str(certs.serving_key)
