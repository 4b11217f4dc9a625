"""Extender /filter and /prioritize latency (p50/p99) at 1,000 and 5,000 NodeNames.

Real HTTP on loopback: the Flask app behind werkzeug's threaded server (the app code is what is
measured; gunicorn's gthread worker adds its own parsing), timed over a kept-alive connection as
kube-scheduler's client does. 5 % of nodes are marked for removal and 1 % carry reservations, so
the guard does real work. Bounded: 300 requests per verb and size.

    .venv/bin/python -m benchmarks.extender [--requests 300]   (as a module: this file's name
    would shadow the `extender` package if run as a script)
"""

from __future__ import annotations

import argparse
import json
import logging
import socket
import statistics
import threading
import time
from typing import Any

import requests
from werkzeug.serving import make_server

from extender.api.resources import Resources
from extender.http.app import create_app
from extender.settings import Settings
from extender.state import ClusterState, NodeInfo

POD = {
    "metadata": {"name": "p", "namespace": "default", "uid": "u"},
    "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "500m"}}}]},
    "status": {},
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def state_for(n: int) -> tuple[ClusterState, list[str]]:
    state = ClusterState()
    names = [f"ip-10-0-{i // 250}-{i % 250}.us-west-2.compute.internal" for i in range(n)]
    state.set_nodes(NodeInfo(name=x, provisioner="default", allocatable=Resources.of(cpu=4)) for x in names)
    for x in names[::20]:
        state.mark_for_removal(x, "empty")
    for x in names[1::100]:
        state.reserve(x, {"default/bound": Resources.of(cpu=3.8)})
    return state, names


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(n: int, count: int) -> dict[str, Any]:
    state, names = state_for(n)
    app = create_app(Settings(), state, lambda pods: None)
    port = free_port()
    server = make_server("127.0.0.1", port, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    result: dict[str, Any] = {"nodes": n}
    try:
        with requests.Session() as http:
            for verb in ("filter", "prioritize"):
                body = json.dumps({"Pod": POD, "Nodes": None, "NodeNames": names})
                url = f"http://127.0.0.1:{port}/{verb}"
                headers = {"Content-Type": "application/json"}
                for _ in range(10):
                    http.post(url, data=body, headers=headers)
                samples = []
                for _ in range(count):
                    t0 = time.perf_counter()
                    reply = http.post(url, data=body, headers=headers)
                    samples.append((time.perf_counter() - t0) * 1000)
                    assert reply.status_code == 200
                if verb == "filter":
                    kept = len(reply.json()["NodeNames"])
                    result["kept"] = kept
                result[verb] = {
                    "p50_ms": round(statistics.median(samples), 2),
                    "p99_ms": round(percentile(samples, 0.99), 2),
                }
    finally:
        server.shutdown()
    return result


def main() -> None:
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=300)
    args = parser.parse_args()
    for n in (1000, 5000):
        r = measure(n, args.requests)
        print(
            f"{n:>5} nodes: /filter p50 {r['filter']['p50_ms']} ms p99 {r['filter']['p99_ms']} ms "
            f"(kept {r['kept']}); /prioritize p50 {r['prioritize']['p50_ms']} ms "
            f"p99 {r['prioritize']['p99_ms']} ms"
        )


if __name__ == "__main__":
    main()
