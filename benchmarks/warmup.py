"""First batch against warm ones: pending -> bound of one pod at a time right after a controller
start and right after a leader failover, on the local cluster + moto.

Two `karpy controller` replicas with leader election (hack/localcluster/chaos.py's Replica and
Router: the extender port follows the leader). Phase "start": replica a starts; once its /readyz
answers 200 and it leads, PODS pods are created one after another, each once the one before is
bound. Phase "failover": replica b starts and becomes ready as a follower, a is killed (SIGKILL), and
once b leads the same again. Each pod has hostname anti-affinity to the others, so each needs a new
node: every pod pays the batch window, the solve, the fleet call, the Node create and the bind.
Prints each phase's first pod beside the median of the rest, with the load average; asserts nothing.

    KARPY_CLUSTER_STATE=<run>/state.json python -m benchmarks.warmup [--pods 6]

Run it with PYTHONPATH=<tree> to measure that tree's controller (the replicas inherit it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from benchmarks.provisioning import watch_binds
from hack.localcluster import procs
from hack.localcluster.awsseed import AwsSeed
from hack.localcluster.chaos import (
    LEASE_NAMESPACE,
    PROVISIONER_NAME,
    Replica,
    Router,
    _cleanup,
    _ensure_namespace,
)
from hack.localcluster.karpyenv import api_client, controller_env, create_provisioner, install_provisioner_crd

#: Seconds one pod may take to be bound, and a phase's replica to become ready or lead.
BIND_SECONDS = 90
READY_SECONDS = 120
#: Pause after a bind, so the next pod opens a batch of its own.
GAP_SECONDS = 2.0


def replica_env(state: dict[str, Any], run: str) -> dict[str, str]:
    bind, metrics = procs.free_ports(2)
    env = controller_env(state, f"127.0.0.1:{bind}")
    env.update(
        KARPY_EXTENDER_METRICS_BIND=f"127.0.0.1:{metrics}",
        KARPY_LEADER_ELECTION_ENABLED="true",
        KARPY_LEADER_ELECTION_NAMESPACE=LEASE_NAMESPACE,
        KARPY_LEADER_ELECTION_LEASE_NAME=run,
    )
    return env


def pod(name: str, run: str) -> dict[str, Any]:
    term = {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": run}}}
    return {
        "metadata": {"name": name, "labels": {"app": run}},
        "spec": {
            "nodeSelector": {PROVISIONER_NAME: run},
            "terminationGracePeriodSeconds": 0,
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}},
            "containers": [
                {"name": "c", "image": "pause", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}
            ],
        },
    }


def wait_for(check: Any, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {seconds:.0f}s waiting for {what}")
        time.sleep(0.2)


def ready(replica: Replica) -> bool:
    import requests

    try:
        return requests.get(f"{replica.extender_url}/readyz", timeout=1).status_code == 200
    except requests.RequestException:
        return False


def one_by_one(core: Any, run: str, prefix: str, count: int, bound: dict[str, float]) -> list[float]:
    """Pending -> bound seconds of `count` pods created one after another."""
    latencies = []
    for i in range(count):
        name = f"{prefix}{i}"
        core.create_namespaced_pod(run, pod(name, run))
        created = time.monotonic()
        wait_for(lambda name=name: name in bound, BIND_SECONDS, f"pod {name} to be bound")
        latencies.append(bound[name] - created)
        time.sleep(GAP_SECONDS)
    return latencies


def describe(phase: str, latencies: list[float]) -> str:
    first, rest = latencies[0], latencies[1:]
    warm = statistics.median(rest) if rest else float("nan")
    return (
        f"{phase:>9}: first {first:.2f}s, warm median {warm:.2f}s (first/warm {first / warm:.2f}); "
        f"all {' '.join(f'{x:.2f}' for x in latencies)}"
    )


def main() -> None:
    from kubernetes import client

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pods", type=int, default=6, help="pods per phase, one at a time")
    args = parser.parse_args()
    state = json.loads(Path(os.environ["KARPY_CLUSTER_STATE"]).read_text())
    api = api_client(state, pool=8)
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    ec2 = AwsSeed.from_dict(state["aws"]).client("ec2")
    run = f"warm-{uuid.uuid4().hex[:6]}"
    work = Path(tempfile.mkdtemp(prefix=f"karpy-{run}-"))
    install_provisioner_crd(api)
    _ensure_namespace(core, LEASE_NAMESPACE)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; logs in {work}", flush=True)
    with ExitStack() as stack:
        stack.enter_context(_cleanup(core, custom, ec2, run))
        create_provisioner(api, run)
        _ensure_namespace(core, run)
        wait_for(lambda: core.list_namespaced_service_account(run).items, 30, "the default service account")
        a, b = (Replica(name, replica_env(state, run), work / f"karpy-{name}.log") for name in ("a", "b"))
        for replica in (a, b):
            stack.callback(replica.stop)
        router = Router([a, b], int(state["extender_port"]))
        stack.callback(router.close)
        bound: dict[str, float] = {}
        stop = threading.Event()
        stack.callback(stop.set)
        threading.Thread(target=watch_binds, args=(api, run, bound, stop), daemon=True).start()

        started = time.monotonic()
        a.start()
        wait_for(lambda: ready(a) and a.leads(), READY_SECONDS, "replica a to be ready and lead")
        print(f"replica a ready and leading {time.monotonic() - started:.1f}s after its start", flush=True)
        print(describe("start", one_by_one(core, run, "s", args.pods, bound)), flush=True)

        b.start()
        wait_for(lambda: ready(b), READY_SECONDS, "replica b to be ready")
        a.kill()
        killed = time.monotonic()
        wait_for(b.leads, READY_SECONDS, "replica b to lead")
        print(f"replica b leads {time.monotonic() - killed:.1f}s after a was killed", flush=True)
        print(describe("failover", one_by_one(core, run, "f", args.pods, bound)), flush=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
