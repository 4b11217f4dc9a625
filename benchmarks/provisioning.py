"""Pending -> bound latency (p50/p95) for 5, 100 and 1,000 pods on the local cluster + moto, with the
controller's time split into batch wait, packing, fleet call, node create and binds.

Starts `karpy controller` (the real entry point: gunicorn, one worker) against a running local
cluster, configured only through KARPY_* variables built from the cluster's state.json:

    make cluster-up   # or any run folder; then
    KARPY_CLUSTER_STATE=.run/cluster/state.json .venv/bin/python -m benchmarks.provisioning

Latency per pod = when this process saw the pod bound (a watch on the namespace) - when its create
call returned; sub-second, unlike the apiserver's whole-second timestamps. Pods are created from 16
threads so arrival is not the client's bottleneck; kube-scheduler still marks them Unschedulable
at its own client rate (default 50 QPS, ~25 pods/s), which is what the watch waits for.
The split is the controller's own histograms (sum and count deltas from /metrics over the run).
Bounded: each size waits at most 240 s.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import requests

from hack.localcluster import karpyenv
from hack.localcluster.karpyenv import controller_env

# The built-in table shipped in the package (what the controller uses anyway without a price file).

#: phase -> histogram of the controller (extender/provisioning/metrics.py).
PHASES = {
    "batch wait": "karpy_allocation_controller_batch_window_seconds",
    "packing": "karpy_allocation_controller_binpacking_duration_seconds",
    "fleet call": "karpy_allocation_controller_launch_duration_seconds",
    "node create": "karpy_allocation_controller_node_create_duration_seconds",
    "binds": "karpy_allocation_controller_bind_duration_seconds",
}
SHAPES = (("250m", "256Mi"), ("500m", "512Mi"), ("1", "1Gi"), ("2", "4Gi"))
WAIT_SECONDS = 240


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def scrape(url: str) -> dict[str, float]:
    """metric_sum / metric_count totals (over all label sets) of the PHASES histograms."""
    totals: dict[str, float] = {}
    wanted = tuple(f"{m}_{suffix}" for m in PHASES.values() for suffix in ("sum", "count"))
    for line in requests.get(url, timeout=5).text.splitlines():
        if line.startswith(wanted):
            name = re.split(r"[{ ]", line, maxsplit=1)[0]
            totals[name] = totals.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
    return totals


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def pod(name: str, index: int, provisioner: str) -> dict[str, Any]:
    cpu, memory = SHAPES[index % len(SHAPES)]
    return {
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {"karpenter.sh/provisioner-name": provisioner},
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu, "memory": memory}}}
            ],
        },
    }


def watch_binds(
    api: Any,
    namespace: str,
    bound: dict[str, float],
    stop: threading.Event,
    marked: dict[str, float] | None = None,
) -> None:
    """When each pod was seen bound, and (into `marked`) when kube-scheduler marked it Unschedulable."""
    from kubernetes import client, watch
    from kubernetes.client.exceptions import ApiException

    core = client.CoreV1Api(api)
    while not stop.is_set():
        try:
            for event in watch.Watch().stream(core.list_namespaced_pod, namespace, timeout_seconds=5):
                obj = event["object"]
                name = obj.metadata.name
                if marked is not None and name not in marked and _unschedulable(obj):
                    marked[name] = time.monotonic()
                if obj.spec.node_name and name not in bound:
                    bound[name] = time.monotonic()
                if stop.is_set():
                    return
        except ApiException:
            # A loaded apiserver answers a watch with 504 "Too large resource version": watch again.
            stop.wait(0.5)


def _unschedulable(pod: Any) -> bool:
    conditions = (pod.status.conditions if pod.status else None) or ()
    return any(c.type == "PodScheduled" and c.reason == "Unschedulable" for c in conditions)


def run(api: Any, count: int, metrics_url: str) -> str:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    core = client.CoreV1Api(api)
    name = f"bench-{uuid.uuid4().hex[:6]}"
    karpyenv.create_provisioner(api, name)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    deadline = time.monotonic() + 30
    while True:
        try:
            core.read_namespaced_service_account("default", name)
            break
        except ApiException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    bound: dict[str, float] = {}
    marked: dict[str, float] = {}
    created: dict[str, float] = {}
    stop = threading.Event()
    watcher = threading.Thread(target=watch_binds, args=(api, name, bound, stop, marked), daemon=True)
    watcher.start()
    time.sleep(0.5)  # the watch is open before the first pod exists
    before = scrape(metrics_url)

    def create(i: int) -> None:
        core.create_namespaced_pod(name, pod(f"p{i}", i, name))
        created[f"p{i}"] = time.monotonic()

    try:
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(create, range(count)))
        deadline = time.monotonic() + WAIT_SECONDS
        while len(bound) < count and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1.0)  # the last batch's histograms are observed after its binds
        after = scrape(metrics_url)
    finally:
        stop.set()
        core.delete_namespace(name)
    latencies = [bound[k] - created[k] for k in created if k in bound]
    batches = after.get(f"{PHASES['batch wait']}_count", 0) - before.get(f"{PHASES['batch wait']}_count", 0)
    split = ", ".join(
        f"{phase} {after.get(f'{m}_sum', 0) - before.get(f'{m}_sum', 0):.2f}s" for phase, m in PHASES.items()
    )
    if not latencies:
        return f"{count:>5} pods: none bound within {WAIT_SECONDS}s"
    # kube-scheduler marks pods Unschedulable at its own pace; from then on the wait is karpy's.
    after_mark = [bound[k] - marked[k] for k in marked if k in bound and bound[k] >= marked[k]]
    karpy = (
        f"; Unschedulable->bound ({len(after_mark)} pods seen marked) p50 {percentile(after_mark, 0.5):.2f}s "
        f"p95 {percentile(after_mark, 0.95):.2f}s"
        if after_mark
        else ""
    )
    return (
        f"{count:>5} pods: bound {len(latencies)}/{count} in {batches:.0f} batch(es); pending->bound "
        f"p50 {percentile(latencies, 0.5):.2f}s p95 {percentile(latencies, 0.95):.2f}s "
        f"max {max(latencies):.2f}s{karpy}; "
        f"controller time (summed over batches and parallel launches): {split}"
    )


def main() -> None:

    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="5,100,1000")
    parser.add_argument("--log", default="", help="controller log file (default: a temporary file)")
    args = parser.parse_args()
    state = json.loads(Path(os.environ["KARPY_CLUSTER_STATE"]).read_text())
    api = karpyenv.api_client(state, pool=32)
    # The extender on the port kube-scheduler calls, so its guard keeps the scheduler off the room
    # karpy reserves for the pods it is binding; a free port when another process holds that one.
    port = int(state["extender_port"])
    with socket.socket() as sock:
        if sock.connect_ex(("127.0.0.1", port)) == 0:
            print(f"extender port {port} is taken: kube-scheduler will race karpy's binds")
            port = free_port()
    log_path = Path(args.log or f"/tmp/karpy-bench-controller-{port}.log")
    with running_controller(state, port, log_path):
        time.sleep(5.0)  # let the catalog warm-up finish, as in a controller that has been running
        print(f"controller log: {log_path}")
        for size in (int(s) for s in re.split(r"[, ]+", args.sizes) if s):
            print(run(api, size, f"http://127.0.0.1:{port}/metrics"), flush=True)


def running_controller(
    state: dict[str, Any], port: int, log_path: Path, ready_seconds: float = 60.0
) -> AbstractContextManager[subprocess.Popen[bytes]]:
    """`karpy controller` for the local cluster of `state`, its extender on `port`, once ready."""
    env = controller_env(state, f"127.0.0.1:{port}")
    url = f"http://127.0.0.1:{port}/readyz"
    return karpyenv.running_controller(env, url, log_path, ready_seconds=ready_seconds)


if __name__ == "__main__":
    main()
