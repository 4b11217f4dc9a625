"""Extender /filter latency at 5,000 NodeNames under the controller's real gunicorn options, with
0, 8 and 64 connections stalled mid request (issue 13's target: p99 <= 20 ms with 64 open).

The server runs in a child process (`serve`), as in production: gunicorn, one gthread worker with
extender/http/limits.py's read deadline and body cap, the guard over a ClusterState of 5,000 nodes
(5 % marked, 1 % reserved, as benchmarks/extender.py). The client times `--requests` /filter calls
over one kept-alive connection, like kube-scheduler. Bounded: 300 requests per case.

    .venv/bin/python -m benchmarks.extender_slow_clients [--requests 300] [--nodes 5000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import requests

from benchmarks.extender import POD, free_port, percentile, state_for
from tests.process.http.test_slow_clients import _stall


def serve(port: int, metrics_port: int, nodes: int) -> None:
    from extender.http.app import create_app
    from extender.main import gunicorn_options, wsgi_app
    from extender.serve import serve as run
    from extender.settings import Settings

    settings = Settings(log_level="WARNING")
    settings.extender.bind = f"127.0.0.1:{port}"
    settings.extender.metrics_bind = f"127.0.0.1:{metrics_port}"
    state, _ = state_for(nodes)
    state.set_ready()
    run(
        lambda: wsgi_app(settings, create_app(settings, state, lambda _pods: None)),
        gunicorn_options(settings),
    )


def measure(nodes: int, count: int) -> None:
    port, metrics_port = free_port(), free_port()
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "benchmarks.extender_slow_clients",
            "serve",
            str(port),
            str(metrics_port),
            str(nodes),
        ],
        env={**os.environ, "PYTHONPATH": os.getcwd()},
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(150):
            try:
                if requests.get(f"{url}/readyz", timeout=1).ok:
                    break
            except requests.RequestException:
                time.sleep(0.2)
        _, names = state_for(nodes)
        body = json.dumps({"Pod": POD, "Nodes": None, "NodeNames": names})
        headers = {"Content-Type": "application/json"}
        for stalled in (0, 8, 64):
            conns = _stall(port, stalled)
            try:
                with requests.Session() as http:
                    for _ in range(10):
                        http.post(f"{url}/filter", data=body, headers=headers, timeout=5)
                    samples = []
                    for _ in range(count):
                        started = time.perf_counter()
                        reply = http.post(f"{url}/filter", data=body, headers=headers, timeout=5)
                        samples.append((time.perf_counter() - started) * 1000)
                        assert reply.status_code == 200 and not reply.json()["Error"]
                print(
                    f"{nodes} nodes, {stalled:>2} stalled connections: /filter p50 "
                    f"{statistics.median(samples):.2f} ms p99 {percentile(samples, 0.99):.2f} ms "
                    f"max {max(samples):.2f} ms ({count} requests)"
                )
            finally:
                for conn in conns:
                    conn.close()
    finally:
        child.terminate()
        child.wait(15)


def main() -> None:
    if sys.argv[1:2] == ["serve"]:
        serve(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--nodes", type=int, default=5000)
    args = parser.parse_args()
    measure(args.nodes, args.requests)


if __name__ == "__main__":
    main()
