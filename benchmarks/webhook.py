"""Admission latency under gunicorn: p50/p99 of /mutate/pod and /validate/provisioner at fixed rates.

Starts `karpy webhook --self-signed` on loopback, then drives it with an open-loop Python load
generator: request i is due at t0 + i/rate whatever happened before, so a slow answer shows up
as queueing in the "from schedule" latency instead of silently lowering the rate. Bounded: every
run sends exactly rate x duration requests over a fixed pool of keep-alive HTTPS connections.

    .venv/bin/python benchmarks/webhook.py [--rates 100 500] [--seconds 10] [--kubeconfig F]

"server p99" comes from the webhook's own Prometheus histogram (time inside the app, by bucket), which
separates the app from client and scheduler noise on a shared machine.

Target (issue 4): p99 <= 10 ms at 500 req/s, measured client side.
Exit code 1 when a run misses it or has errors.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from extender.cli.webhook import local_command  # noqa: E402
from tests.unit.webhook.reviews import make_review, pod_manifest, pod_review, provisioner_manifest, valid_spec  # noqa: E402

TARGET_P99_MS = 10.0
TARGET_RATE = 500


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _bodies() -> dict[str, bytes]:
    pod = pod_manifest(
        "web-7d9f-abcde",
        nodeSelector={"kubernetes.io/arch": "amd64"},
        tolerations=[{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}],
    )
    pod["metadata"]["labels"] = {"app": "web", "pod-template-hash": "7d9f"}
    pod["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9f", "uid": "0", "controller": True}
    ]
    return {
        "/mutate/pod": json.dumps(pod_review(pod)).encode(),
        "/validate/provisioner": json.dumps(
            make_review(provisioner_manifest("default", **valid_spec()))
        ).encode(),
    }


@dataclass
class Result:
    path: str
    rate: int
    sent: int
    errors: int
    elapsed: float
    service_ms: list[float]
    schedule_ms: list[float]

    @staticmethod
    def pct(values: list[float], q: float) -> float:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")

    def line(self) -> str:
        s, q = self.service_ms, self.schedule_ms
        return (
            f"{self.path:<22} {self.rate:>5}/s  sent {self.sent:>5} in {self.elapsed:5.1f}s  "
            f"errors {self.errors}  "
            f"p50 {statistics.median(s):6.2f} ms  p99 {self.pct(s, 0.99):6.2f} ms  max {max(s):6.2f} ms  "
            f"| from schedule p99 {self.pct(q, 0.99):6.2f} ms"
        )


def drive(
    port: int, context: ssl.SSLContext, path: str, body: bytes, rate: int, seconds: float, connections: int
) -> Result:
    total = int(rate * seconds)
    lock = threading.Lock()
    next_index = [0]
    service: list[float] = []
    scheduled: list[float] = []
    errors = [0]
    start = time.perf_counter() + 0.2

    def worker() -> None:
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
        while True:
            with lock:
                i = next_index[0]
                next_index[0] += 1
            if i >= total:
                break
            due = start + i / rate
            delay = due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            sent = time.perf_counter()
            try:
                conn.request(
                    "POST", path + "?timeout=3s", body=body, headers={"Content-Type": "application/json"}
                )
                resp = conn.getresponse()
                data = resp.read()
                ok = resp.status == 200 and b'"allowed"' in data
            except (OSError, http.client.HTTPException):
                ok = False
                conn.close()
                conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
            done = time.perf_counter()
            with lock:
                service.append((done - sent) * 1000)
                scheduled.append((done - due) * 1000)
                errors[0] += not ok
        conn.close()

    threads = [threading.Thread(target=worker) for _ in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return Result(path, rate, total, errors[0], time.perf_counter() - start, service, scheduled)


def server_buckets(port: int, context: ssl.SSLContext, path: str) -> dict[float, float]:
    """Cumulative counts of the webhook's own duration histogram for `path` (le seconds -> count)."""
    with urllib.request.urlopen(f"https://127.0.0.1:{port}/metrics", context=context, timeout=5) as resp:
        text = resp.read().decode()
    buckets = {}
    for match in re.finditer(r"request_duration_seconds_bucket\{(.*?)\} ([0-9.e+]+)", text):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1)))
        if labels.get("path") == path:
            buckets[float(labels["le"])] = float(match.group(2))
    return buckets


def server_p99_bound(before: dict[float, float], after: dict[float, float]) -> float:
    """Upper bucket bound (ms) under which 99% of this run's requests were answered, server side."""
    total = after[float("inf")] - before.get(float("inf"), 0.0)
    for le in sorted(after):
        if total and after[le] - before.get(le, 0.0) >= 0.99 * total:
            return le * 1000
    return float("inf")


def start_webhook(
    cert_dir: Path, port: int, kubeconfig: str, workers: int, threads: int
) -> subprocess.Popen[bytes]:
    args = local_command(
        port=port,
        cert_dir=cert_dir,
        extra=[
            f"--kubeconfig={kubeconfig or cert_dir / 'none'}",
            f"--workers={workers}",
            f"--threads={threads}",
        ],
    )
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:
        try:
            context = ssl.create_default_context(cafile=str(cert_dir / "ca.crt"))
            with urllib.request.urlopen(f"https://127.0.0.1:{port}/readyz", context=context, timeout=2):
                return proc
        except (OSError, ssl.SSLError):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("webhook did not start") from None
            time.sleep(0.2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", type=int, nargs="+", default=[100, 500])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument(
        "--kubeconfig", default="", help="read Provisioners from this cluster (default: none)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        port = _free_port()
        proc = start_webhook(Path(tmp), port, args.kubeconfig, args.workers, args.threads)
        context = ssl.create_default_context(cafile=str(Path(tmp) / "ca.crt"))
        failed = False
        try:
            print(
                f"karpy webhook under gunicorn (gthread, {args.workers} worker(s) x {args.threads} threads), "
                f"{args.connections} keep-alive TLS connections, {args.seconds:.0f}s per run; "
                f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}"
            )
            for path, body in _bodies().items():
                drive(port, context, path, body, 50, 1.0, args.connections)  # warm-up
                for rate in args.rates:
                    before = server_buckets(port, context, path)
                    result = drive(port, context, path, body, rate, args.seconds, args.connections)
                    bound = server_p99_bound(before, server_buckets(port, context, path))
                    print(f"{result.line()} | server p99 <= {bound:g} ms", flush=True)
                    if result.errors or (
                        rate >= TARGET_RATE and Result.pct(result.service_ms, 0.99) > TARGET_P99_MS
                    ):
                        failed = True
        finally:
            proc.terminate()
            proc.wait(timeout=20)
    print(f"target p99 <= {TARGET_P99_MS:.0f} ms at {TARGET_RATE} req/s: {'MISSED' if failed else 'met'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
