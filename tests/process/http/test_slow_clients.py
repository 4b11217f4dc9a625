"""Slow and hostile clients cannot starve the extender (issue 13, Found 2).

A real gunicorn server (the controller's options) in a subprocess; 8, then 64 connections that send
part of a request and stall (half in the headers, half in the body) stay open while /healthz and
/filter are timed. Before the fix (plain gthread, 8 threads) 8 such connections made both time out:
`python -m tests.process.http.slowserver PORT MPORT stock` serves that configuration for comparison.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import pytest
import requests

from extender.settings import ExtenderSettings
from hack.localcluster.procs import free_port
from tests.process.http import slowserver

POD = {"metadata": {"name": "p", "namespace": "ns", "uid": "u1"}, "spec": {"containers": []}}
#: An answer slower than this while connections are stalled counts as starved.
ANSWER_SECONDS = 1.0


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[int, int]]:
    port, metrics_port = free_port(), free_port()

    def up() -> bool:
        try:
            return requests.get(f"http://127.0.0.1:{port}/healthz", timeout=1).ok
        except requests.RequestException:
            return False

    with slowserver.running([str(port), str(metrics_port)], up):
        yield port, metrics_port


def _stall(port: int, count: int) -> list[socket.socket]:
    """`count` connections that started a request and went quiet: half mid-headers, half mid-body."""
    conns = []
    for i in range(count):
        conn = socket.create_connection(("127.0.0.1", port), timeout=5)
        if i % 2:
            conn.sendall(b'POST /filter HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{"Pod":')
        else:
            conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        conns.append(conn)
    time.sleep(0.5)  # let the worker pick them up
    return conns


def _timed(method: str, url: str, **kwargs: object) -> tuple[int, float]:
    started = time.perf_counter()
    reply = requests.request(method, url, timeout=ANSWER_SECONDS * 5, **kwargs)  # type: ignore[arg-type]
    return reply.status_code, time.perf_counter() - started


@pytest.mark.parametrize("stalled", [8, 64])
def test_health_and_filter_answer_while_connections_stall(server: tuple[int, int], stalled: int) -> None:
    port, _ = server
    conns = _stall(port, stalled)
    try:
        timings = []
        for _ in range(10):
            status, seconds = _timed("GET", f"http://127.0.0.1:{port}/healthz")
            assert status == 200
            timings.append(seconds)
            status, seconds = _timed(
                "POST", f"http://127.0.0.1:{port}/filter", json={"Pod": POD, "NodeNames": ["n1", "n2"]}
            )
            assert status == 200
            timings.append(seconds)
        print(f"{stalled} stalled connections: slowest answer {max(timings) * 1000:.1f} ms")
        assert max(timings) < ANSWER_SECONDS
    finally:
        for conn in conns:
            conn.close()


def test_stalled_connections_are_closed_after_the_read_deadline(server: tuple[int, int]) -> None:
    port, _ = server
    limit = ExtenderSettings().request_read_seconds
    conns = _stall(port, 4)
    started = time.monotonic()
    try:
        for conn in conns:
            conn.settimeout(limit + 5)
            data = conn.recv(4096)  # b"" (closed in headers) or a 408 JSON answer (closed in body)
            assert data == b"" or data.startswith(b"HTTP/1.1 408")
        assert time.monotonic() - started < limit + 5
    finally:
        for conn in conns:
            conn.close()


def test_oversized_body_is_refused_with_json(server: tuple[int, int]) -> None:
    port, _ = server
    limit = ExtenderSettings().max_body_bytes
    reply = requests.post(
        f"http://127.0.0.1:{port}/filter",
        data=b"x" * (limit + 1),
        headers={"Content-Type": "application/json"},
        timeout=30,
    )
    assert reply.status_code == 413
    assert reply.json()["code"] == 413


@pytest.mark.parametrize(
    "request_bytes",
    [b"GET /healthz HTTP/9.9\r\n\r\n", b"POST /filter HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n"],
)
def test_broken_framing_is_answered_with_json(server: tuple[int, int], request_bytes: bytes) -> None:
    """Issue 26, found while probing: a request gunicorn cannot parse got its HTML 400 page although
    every error is JSON; now the same status with a JSON body."""
    with socket.create_connection(("127.0.0.1", server[0]), timeout=5) as conn:
        conn.sendall(request_bytes)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400") and b"Content-Type: application/json" in head, answer
    assert json.loads(body)["code"] == 400


def test_metrics_port_serves_only_metrics(server: tuple[int, int]) -> None:
    _, metrics_port = server
    base = f"http://127.0.0.1:{metrics_port}"
    assert requests.get(f"{base}/metrics", timeout=5).status_code == 200
    reply = requests.post(f"{base}/filter", data=json.dumps({"Pod": POD, "NodeNames": ["n1"]}), timeout=5)
    assert reply.status_code == 404 and reply.headers["Content-Type"] == "application/json"
    assert requests.get(f"{base}/healthz", timeout=5).status_code == 404


def test_cutting_off_stalled_clients_never_freezes_kept_alive_callers(server: tuple[int, int]) -> None:
    """kube-scheduler keeps its connection alive. When the read deadline cut the stalled clients off,
    gunicorn closed each one gracefully on its main loop (lingering up to 2 s for a peer that never
    closes), so requests on live connections hung for 8 x 2 s. Failed before: a request hung > 8 s."""
    port, _ = server
    limit = ExtenderSettings().request_read_seconds
    conns = _stall(port, 8)
    slowest = 0.0
    try:
        with requests.Session() as http:
            started = time.monotonic()
            while time.monotonic() - started < limit + 2:  # across the moment they are cut off
                t0 = time.perf_counter()
                reply = http.post(
                    f"http://127.0.0.1:{port}/filter", json={"Pod": POD, "NodeNames": ["n1"]}, timeout=10
                )
                assert reply.status_code == 200
                slowest = max(slowest, time.perf_counter() - t0)
    finally:
        for conn in conns:
            conn.close()
    print(f"slowest kept-alive answer across the cut-off: {slowest * 1000:.1f} ms")
    assert slowest < 2 * ANSWER_SECONDS
