"""karpy at scale on the local control plane: thousands of nodes, tens of thousands of bound pods.

Measures what issue 13 asks of a 5,000-node cluster, each figure printed, none asserted:

- controller RSS (gunicorn master + worker, summed over the process tree) with 0 pods and after
  every step of bound pods, and the growth per 10,000 pods, so 150,000 pods can be extrapolated;
- time to plan and launch a 2,000-pod batch (pending -> bound p50/p95/max, the controller's phase
  split from its own histograms), with every bound pod of the cluster in its inventory;
- watch lag while pods are created: for the k-th pod created in a step, the time from its create
  call returning to the controller's bound-pod index counting k pods of the step (the gauge
  `karpy_cluster_bound_pods`, polled every 50 ms, so lags are exact to about that);
- extender `/filter` and `/prioritize` p50/p99 with all node names in the request, first on an idle
  extender, then while `--slow` connections trickle a request one byte per second.

Nodes are plain Node objects (not kwok-managed: 5,000 kwok leases would swamp a 2-core machine);
they are created Ready and turn NotReady later, so the pods tolerate everything and stay bound.
The cluster comes from KARPY_CLUSTER_STATE (state.json of `make cluster-up`) or is started in a
temporary folder and stopped at the end. Bounded: each phase has its own deadline.

    .venv/bin/python -m benchmarks.scale [--nodes 5000 --pods 50000 --step 10000 --batch 2000 --slow 64]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import requests

from benchmarks.provisioning import free_port, percentile, running_controller
from benchmarks.provisioning import run as provision_batch
from hack.localcluster import karpyenv
from hack.localcluster.karpyenv import install_provisioner_crd

ZONES = ("us-west-2a", "us-west-2b", "us-west-2c")
CREATE_DEADLINE = 1800.0
READY_DEADLINE = 120.0
# Per extender request and per latency phase: a starved extender ends the phase, counted as failures.
REQUEST_TIMEOUT = 5.0
PHASE_SECONDS = 60.0


@contextmanager
def local_cluster() -> Iterator[dict[str, Any]]:
    """The running cluster named by KARPY_CLUSTER_STATE, or a fresh one stopped afterwards."""
    state_file = os.environ.get("KARPY_CLUSTER_STATE")
    if state_file:
        yield json.loads(Path(state_file).read_text())
        return
    from hack.localcluster import cluster as localcluster

    folder = Path(tempfile.mkdtemp(prefix="karpy-scale-"))
    state = localcluster.up(folder, die_with_parent=True, quiet=True)
    try:
        yield state
    finally:
        localcluster.down(folder, quiet=True)


def api_client(state: dict[str, Any]) -> Any:
    return karpyenv.api_client(state, pool=32)


def node(index: int) -> dict[str, Any]:
    name = f"scale-{index:05d}"
    zone = ZONES[index % len(ZONES)]
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    capacity = {"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "topology.kubernetes.io/zone": zone,
                "node.kubernetes.io/instance-type": "m5.2xlarge",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/os": "linux",
                "karpy.sh/scale-benchmark": "true",
            },
        },
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": now,
                }
            ],
        },
    }


def bound_pod(index: int, nodes: int) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"bound-{index:06d}",
            "labels": {"app": f"app-{index % 50}"},
            "ownerReferences": [],
        },
        "spec": {
            "nodeName": f"scale-{index % nodes:05d}",
            "tolerations": [{"operator": "Exists"}],
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {"name": "c", "image": "pause", "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}}}
            ],
        },
    }


def create_all(fn: Any, items: range, deadline: float, done: list[float] | None = None) -> tuple[int, float]:
    """Create with 16 threads; returns (created, seconds). Stops at the deadline. `done` gets the
    monotonic time each create call returned."""
    started = time.monotonic()
    created = 0

    def one(i: int) -> int:
        if time.monotonic() > deadline:
            return 0
        fn(i)
        if done is not None:
            done.append(time.monotonic())
        return 1

    with ThreadPoolExecutor(16) as pool:
        created = sum(pool.map(one, items))
    return created, time.monotonic() - started


INDEX_GAUGE = "karpy_cluster_bound_pods"


def indexed_pods(metrics_url: str) -> float | None:
    """The controller's bound-pod index size, from /metrics."""
    try:
        text = requests.get(metrics_url, timeout=REQUEST_TIMEOUT).text
    except requests.RequestException:
        return None
    for line in text.splitlines():
        if line.startswith(INDEX_GAUGE + " "):
            return float(line.split()[1])
    return None


class LagProbe:
    """Polls the index gauge every 50 ms while pods are created: (time, count) samples."""

    def __init__(self, metrics_url: str) -> None:
        self.url = metrics_url
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            count = indexed_pods(self.url)
            if count is not None:
                self.samples.append((time.monotonic(), count))

    def __enter__(self) -> LagProbe:
        self._thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=REQUEST_TIMEOUT + 1)

    def lags(self, baseline: float, created: list[float], settle: float = 30.0) -> list[float]:
        """Per pod k (in order of its create returning): when the gauge first reached baseline + k,
        minus that time; pods the gauge never reached within `settle` s of the last create are
        left out (reported as the count missing)."""
        end = (created[-1] if created else time.monotonic()) + settle
        while time.monotonic() < end and (not self.samples or self.samples[-1][1] < baseline + len(created)):
            time.sleep(0.05)
        result, i = [], 0
        for k, at in enumerate(sorted(created), start=1):
            while i < len(self.samples) and self.samples[i][1] < baseline + k:
                i += 1
            if i == len(self.samples):
                break
            result.append(max(self.samples[i][0] - at, 0.0))
        return result


def describe_lag(lags: list[float], created: int) -> str:
    if not lags:
        return "watch lag: not measured (the index gauge did not move)"
    missing = f", {created - len(lags)} never counted" if len(lags) < created else ""
    return (
        f"watch lag p50 {percentile(lags, 0.5):.2f}s p95 {percentile(lags, 0.95):.2f}s "
        f"max {max(lags):.2f}s{missing}"
    )


def process_tree(pid: int) -> list[int]:
    """`pid` and its descendants (gunicorn forks its worker), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo.extend(children.get(current, []))
    return tree


def tree_rss_mb(pid: int) -> float:
    """RSS of `pid` and its descendants."""
    total_kb = 0
    for current in process_tree(pid):
        try:
            for line in Path(f"/proc/{current}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total_kb += int(line.split()[1])
        except OSError:
            continue
    return total_kb / 1024


@contextmanager
def controller(state: dict[str, Any], log_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """`karpy controller` on the extender port kube-scheduler calls (or a free one if it is taken)."""
    port = int(state["extender_port"])
    with socket.socket() as sock:
        if sock.connect_ex(("127.0.0.1", port)) == 0:
            port = free_port()
    with running_controller(state, port, log_path, READY_DEADLINE) as process:
        yield process, port


def wait_for_catalog(log_path: Path, seconds: float = 180.0) -> bool:
    """Whether the controller's catalog warm-up finished (it logs "Discovered N instance type(s)")
    within `seconds`: the catalog is part of the idle footprint, not of the pods'."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if "Discovered" in log_path.read_text(errors="replace"):
            return True
        time.sleep(1.0)
    return False


def settle_rss(pid: int, seconds: float = 10.0) -> float:
    """RSS once the controller has digested what it was sent (stable for 2 s, at most `seconds`)."""
    last, deadline = -1.0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        now = tree_rss_mb(pid)
        if abs(now - last) < 1.0:
            return now
        last = now
        time.sleep(2.0)
    return tree_rss_mb(pid)


@contextmanager
def slow_connections(port: int, count: int) -> Iterator[list[socket.socket]]:
    """`count` connections that send a /filter request one byte per second and never finish it."""
    stop = threading.Event()
    socks: list[socket.socket] = []
    head = (
        b"POST /filter HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: 100000\r\n\r\n{"
    )
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        sock.sendall(head[: len(head) // 2])
        socks.append(sock)

    def trickle() -> None:
        while not stop.wait(1.0):
            for sock in list(socks):
                try:
                    sock.send(b" ")
                except OSError:
                    socks.remove(sock)

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    try:
        yield socks
    finally:
        stop.set()
        thread.join(timeout=5)
        for sock in socks:
            sock.close()


def extender_latency(port: int, names: list[str], count: int) -> dict[str, Any]:
    pod = {
        "metadata": {"name": "probe", "namespace": "default", "uid": "probe-uid"},
        "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "500m"}}}]},
        "status": {},
    }
    body = json.dumps({"Pod": pod, "Nodes": None, "NodeNames": names})
    result: dict[str, Any] = {}
    with requests.Session() as http:
        # /healthz is the control: no work at all, so its tail is the machine's, not the extender's.
        for verb in ("filter", "prioritize", "healthz"):
            samples, failures = [], 0
            phase_end = time.monotonic() + PHASE_SECONDS
            for _ in range(count):
                if time.monotonic() > phase_end:
                    failures += count - len(samples)
                    break
                started = time.perf_counter()
                try:
                    if verb == "healthz":
                        reply = http.get(f"http://127.0.0.1:{port}/healthz", timeout=REQUEST_TIMEOUT)
                    else:
                        reply = http.post(
                            f"http://127.0.0.1:{port}/{verb}",
                            data=body,
                            timeout=REQUEST_TIMEOUT,
                            headers={"Content-Type": "application/json"},
                        )
                    ok = reply.status_code == 200
                except requests.RequestException:
                    ok = False
                samples.append((time.perf_counter() - started) * 1000)
                failures += not ok
            result[verb] = (statistics.median(samples), percentile(samples, 0.99), failures)
    return result


def describe_latency(label: str, result: dict[str, Any], count: int) -> str:
    parts = [
        f"/{verb} p50 {p50:.1f} ms p99 {p99:.1f} ms ({failed}/{count} failed)"
        for verb, (p50, p99, failed) in result.items()
    ]
    return (
        f"{label}: "
        + "; ".join(parts)
        + f" (a failure: not 200, or no answer within {REQUEST_TIMEOUT:.0f} s)"
    )


def main() -> None:
    from kubernetes import client

    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=50000)
    parser.add_argument("--step", type=int, default=10000)
    parser.add_argument("--batch", type=int, default=2000)
    parser.add_argument("--slow", type=int, default=64)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--latency-runs", type=int, default=1, help="latency phases, each idle then slow")
    args = parser.parse_args()
    deadline = time.monotonic() + CREATE_DEADLINE
    print(f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores", flush=True)
    with local_cluster() as state:
        api = api_client(state)
        install_provisioner_crd(api)
        core = client.CoreV1Api(api)
        made, took = create_all(lambda i: core.create_node(node(i)), range(args.nodes), deadline)
        print(f"created {made} nodes in {took:.0f} s ({made / max(took, 1e-9):.0f}/s)", flush=True)
        log_path = Path(tempfile.gettempdir()) / f"karpy-scale-controller-{os.getpid()}.log"
        with controller(state, log_path) as (process, port):
            print(f"controller log: {log_path}", flush=True)
            if not wait_for_catalog(log_path):
                print("the catalog warm-up did not finish: the idle figure lacks it", flush=True)
            baseline = settle_rss(process.pid)
            print(f"controller RSS with {made} nodes and 0 bound pods: {baseline:.0f} MB", flush=True)
            metrics_url = f"http://127.0.0.1:{port}/metrics"
            created, previous = 0, baseline
            steps: list[float] = []
            first_step = 0
            while created < args.pods and time.monotonic() < deadline:
                upto = min(created + args.step, args.pods)
                before = indexed_pods(metrics_url) or 0.0
                returned: list[float] = []
                with LagProbe(metrics_url) as probe:
                    made_pods, took = create_all(
                        lambda i: core.create_namespaced_pod("default", bound_pod(i, made)),
                        range(created, upto),
                        deadline,
                        returned,
                    )
                    lags = probe.lags(before, returned)
                created += made_pods
                rss = settle_rss(process.pid)
                rate = made_pods / max(took, 1e-9)
                print(
                    f"{created:>6} bound pods (+{made_pods} in {took:.0f} s, {rate:.0f}/s):"
                    f" controller RSS {rss:.0f} MB (+{rss - previous:.0f} MB);"
                    f" {describe_lag(lags, made_pods)}",
                    flush=True,
                )
                previous = rss
                steps.append(rss)
                first_step = first_step or created
                if made_pods < upto - (created - made_pods):
                    break
            if created:
                per_10k = (previous - baseline) / created * 10000
                print(
                    f"RSS per 10,000 bound pods: {per_10k:.1f} MB; extrapolated at 150,000 pods: "
                    f"{baseline + per_10k * 15:.0f} MB",
                    flush=True,
                )
                if len(steps) > 1:
                    # The first step also pays one-off growth (allocator arenas, first watch events).
                    marginal = (steps[-1] - steps[0]) / (created - first_step) * 10000
                    at_150k = steps[-1] + marginal * (150000 - created) / 10000
                    print(
                        f"RSS per 10,000 bound pods after the first step: {marginal:.1f} MB; "
                        f"extrapolated at 150,000 pods: {at_150k:.0f} MB",
                        flush=True,
                    )
            names = [f"scale-{i:05d}" for i in range(made)]

            def latency(situation: str) -> None:
                measured = extender_latency(port, names, args.requests)
                label = f"extender with {made} node names, {situation}"
                print(describe_latency(label, measured, args.requests), flush=True)

            for _ in range(args.latency_runs):
                latency("idle")
                with slow_connections(port, args.slow) as socks:
                    latency(f"{len(socks)} slow connections open")
            if args.batch:
                print(provision_batch(api, args.batch, f"http://127.0.0.1:{port}/metrics"), flush=True)
            print(f"controller RSS at the end: {tree_rss_mb(process.pid):.0f} MB", flush=True)


if __name__ == "__main__":
    main()
