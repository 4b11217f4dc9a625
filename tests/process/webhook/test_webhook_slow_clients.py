"""Slow clients cannot starve the webhook (issue 13, Found 2): 8, then 64 connections stall mid TLS
handshake, mid headers or mid body while /healthz and /validate/provisioner are timed over TLS.
Before issue 13 (8 threads, no read deadline, blocking TLS handshake) 8 such connections made both
time out."""

from __future__ import annotations

import json
import socket
import ssl
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.process.webhook.local import local_webhook
from tests.unit.webhook.reviews import make_review, provisioner_manifest, valid_spec

ROOT = Path(__file__).resolve().parents[3]
ANSWER_SECONDS = 1.0


@pytest.fixture(scope="module")
def webhook(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, ssl.SSLContext]]:
    with local_webhook(tmp_path_factory.mktemp("certs")) as server:
        yield server.port, server.context()


def _stall(port: int, context: ssl.SSLContext, count: int) -> list[socket.socket]:
    conns: list[socket.socket] = []
    for i in range(count):
        raw = socket.create_connection(("127.0.0.1", port), timeout=5)
        if i % 3 == 0:
            raw.sendall(b"\x16\x03\x01\x02\x00\x01")  # the start of a ClientHello, then nothing
            conns.append(raw)
            continue
        tls = context.wrap_socket(raw, server_hostname="127.0.0.1")
        if i % 3 == 1:
            tls.sendall(b"POST /validate/provisioner HTTP/1.1\r\nHost: x\r\nContent-Length: 50000\r\n\r\n{")
        else:
            tls.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        conns.append(tls)
    time.sleep(0.5)
    return conns


def _timed(url: str, context: ssl.SSLContext, body: bytes | None = None) -> float:
    started = time.perf_counter()
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, context=context, timeout=ANSWER_SECONDS * 5) as reply:
        assert reply.status == 200
        reply.read()
    return time.perf_counter() - started


@pytest.mark.parametrize("stalled", [8, 64])
def test_health_and_admission_answer_while_connections_stall(
    webhook: tuple[int, ssl.SSLContext], stalled: int
) -> None:
    port, context = webhook
    review = json.dumps(make_review(provisioner_manifest("default", **valid_spec()))).encode()
    conns = _stall(port, context, stalled)
    try:
        timings = []
        for _ in range(5):
            timings.append(_timed(f"https://127.0.0.1:{port}/healthz", context))
            timings.append(
                _timed(f"https://127.0.0.1:{port}/validate/provisioner?timeout=10s", context, review)
            )
        print(f"{stalled} stalled TLS connections: slowest answer {max(timings) * 1000:.1f} ms")
        assert max(timings) < ANSWER_SECONDS
    finally:
        for conn in conns:
            conn.close()
