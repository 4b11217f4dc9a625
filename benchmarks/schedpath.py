"""kube-scheduler's path at scale: what registering karpy's extender costs kube-scheduler.

One local control plane with `--nodes` plain Ready Node objects (as benchmarks.scale makes them),
one `karpy controller` serving the extender over HTTP, and `--runs` rounds of one run per
`--sides` configuration, alternated (in order, then reversed in the next round, so drift and the
other tenants' noise hit every side): before each run kube-scheduler is restarted with karpy's
extender as shipped (`guarded-only`: its filter, called only for pods requesting karpy.sh/guarded),
called for every pod (`every-pod`: filter and prioritize, docs/scheduler-path.md's every-pod
configuration) or with the filter only (`filter-only`), or without an extender (`without`), or with
an extender that does nothing in
karpy's place (`noop`: filter and prioritize; `noop-filter`: filter only; benchmarks/noop_extender.py,
its own process: the floor of any extender called for every pod), and with its
client QPS at kube-scheduler's defaults (50/100) or lifted (1000/2000). Each run
creates `--pods` pods kube-scheduler places on the existing nodes and reports:

- throughput: pods scheduled / (last scheduled - first create call started), pods/s; in stream
  mode the pods' create rate (printed beside it) bounds it;
- creation -> scheduled p50/p99: from a pod's create call returning to a watch seeing its nodeName
  (`--mode backlog`: every pod is created first, then kube-scheduler starts; from its start);
- CPU seconds kube-scheduler and karpy (process tree) spent in the run;
- karpy's own handler time per /filter and /prioritize call (its histogram), and the call count.

Pods tolerate every taint (the nodes have no kubelet and turn NotReady after a while). `--kind`:
plain pods, pods with zone and hostname topology spread, or pods with required hostname
anti-affinity within groups. Bounded: each run has a deadline (`--run-seconds`) and stops by
itself; its pods are deleted after it; the cluster (KARPY_CLUSTER_STATE's, else a temporary one
torn down at the end) gets its default kube-scheduler back. docs/scheduler-path.md has figures.

    .venv/bin/python -m benchmarks.schedpath --nodes 1000 --pods 3000 --runs 2 --qps lifted --kind plain \
        [--sides guarded-only,every-pod,filter-only,noop,noop-filter,without] [--mode stream|backlog]
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import requests

from benchmarks.provisioning import percentile
from benchmarks.scale import api_client, controller, create_all, local_cluster, node, process_tree
from hack.localcluster import cluster as localcluster
from hack.localcluster.karpyenv import install_provisioner_crd

NAMESPACE = "schedpath"
QPS = {"default": (None, None), "lifted": (1000.0, 2000)}
EVERY_POD = {"extender": True, "prioritize": True, "managed": False}
FILTER_ONLY = {"extender": True, "prioritize": False, "managed": False}
#: The sides that register benchmarks/noop_extender.py in karpy's place, with the same knobs.
NOOP_SIDES = frozenset({"noop", "noop-filter"})
#: --sides -> localcluster.restart_scheduler's extender knobs.
SIDES: dict[str, dict[str, bool]] = {
    "guarded-only": {"extender": True, "prioritize": False, "managed": True},
    "every-pod": EVERY_POD,
    "filter-only": FILTER_ONLY,
    "noop": EVERY_POD,
    "noop-filter": FILTER_ONLY,
    "without": {"extender": False},
}
NODES_DEADLINE = 1200.0
HANDLER_METRIC = "karpy_extender_request_duration_seconds"


def pod(kind: str, run: str, index: int, groups: int) -> dict[str, Any]:
    group = f"g{index % groups}"
    spec: dict[str, Any] = {
        "tolerations": [{"operator": "Exists"}],
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {"name": "c", "image": "pause", "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}
        ],
    }
    selector = {"matchLabels": {"schedpath-run": run, "group": group}}
    if kind == "spread":
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": selector,
            },
            {
                "maxSkew": 1,
                "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": selector,
            },
        ]
    elif kind == "anti":
        spec["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": "kubernetes.io/hostname", "labelSelector": selector}
                ]
            }
        }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"sp-{run}-{index:05d}", "labels": {"schedpath-run": run, "group": group}},
        "spec": spec,
    }


class BindWatch:
    """Watches the run's pods and records when each is first seen with a nodeName.

    Over http.client, reading each chunk as it arrives (the kubernetes client's urllib3 stream
    held events back here); a watch the apiserver ends is resumed from the last resourceVersion
    seen (`resumed` counts them, an ERROR event is reported in `error`)."""

    def __init__(self, core: Any, state: dict[str, Any], run: str, seconds: float) -> None:
        self.bound: dict[str, float] = {}
        self.error: str | None = None
        self.resumed = 0
        self._selector = f"schedpath-run={run}"
        listed = core.list_namespaced_pod(NAMESPACE, label_selector=self._selector, limit=1)
        self._version = listed.metadata.resource_version
        pki = state["pki"]
        self._context = ssl.create_default_context(cafile=pki["ca_cert"])
        self._context.load_cert_chain(pki["admin_cert"], pki["admin_key"])
        self._url = urlsplit(state["apiserver_url"])
        self._until = time.monotonic() + seconds
        self._connection: http.client.HTTPSConnection | None = None
        self._closing = False
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _open(self) -> http.client.HTTPResponse:
        url, context = self._url, self._context
        self._connection = http.client.HTTPSConnection(url.hostname, url.port, context=context)
        query = urlencode(
            {
                "watch": "1",
                "labelSelector": self._selector,
                "resourceVersion": self._version,
                "timeoutSeconds": str(max(int(self._until - time.monotonic()), 1)),
            }
        )
        self._connection.request("GET", f"/api/v1/namespaces/{NAMESPACE}/pods?{query}")
        response = self._connection.getresponse()
        if response.status != 200:
            raise RuntimeError(f"watching pods: {response.status} {response.read()[:300]!r}")
        return response

    def _read(self) -> None:
        response = self._open()
        try:
            while not self._closing and time.monotonic() < self._until:
                self._consume(response)
                if self.error or self._closing:
                    return
                self.resumed += 1
                response = self._open()
        except Exception as exc:  # closed at the end of the run, or broken: said in the report
            if not self._closing:
                self.error = repr(exc)

    def _consume(self, response: http.client.HTTPResponse) -> None:
        # read1 returns what has arrived: a watcher that falls behind is closed by the apiserver.
        pending = b""
        while chunk := response.read1(1 << 16):
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                event = json.loads(line)
                obj = event.get("object") or {}
                if event.get("type") == "ERROR":
                    self.error = f"watch error: {obj.get('message')}"
                    return
                meta = obj.get("metadata") or {}
                self._version = meta.get("resourceVersion") or self._version
                name = meta.get("name")
                if name and (obj.get("spec") or {}).get("nodeName") and name not in self.bound:
                    self.bound[name] = time.monotonic()

    def close(self) -> None:
        self._closing = True
        sock = self._connection.sock if self._connection is not None else None
        if sock is not None:
            sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(timeout=5)
        if self._connection is not None:
            self._connection.close()


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of `pid` and its live descendants."""
    ticks = 0
    for current in process_tree(pid):
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def handler_totals(metrics_url: str) -> dict[str, tuple[float, float]]:
    """(sum seconds, count) of karpy's extender handler histogram per verb."""
    totals: dict[str, list[float]] = {}
    text = requests.get(metrics_url, timeout=10).text
    for line in text.splitlines():
        for suffix, slot in (("_sum", 0), ("_count", 1)):
            if line.startswith(HANDLER_METRIC + suffix + "{"):
                verb = line.split('verb="', 1)[1].split('"', 1)[0]
                totals.setdefault(verb, [0.0, 0.0])[slot] = float(line.rsplit(" ", 1)[1])
    return {verb: (s, c) for verb, (s, c) in totals.items()}


@dataclass
class RunResult:
    side: str
    created: int
    scheduled: int
    create_rate: float
    throughput: float
    p50: float
    p99: float
    scheduler_cpu: float
    karpy_cpu: float
    handler_ms: dict[str, tuple[float, float]]
    load: float


def one_run(
    core: Any, args: argparse.Namespace, run: str, side: str, karpy_pid: int, metrics_url: str
) -> RunResult:
    groups = max(10, math.ceil(args.pods * 2 / args.nodes)) if args.kind == "anti" else 10
    deadline = time.monotonic() + args.run_seconds
    folder = Path(args.folder)
    qps, burst = QPS[args.qps]

    def start_scheduler() -> tuple[int, float]:
        url = args.noop_url if side in NOOP_SIDES else None
        localcluster.restart_scheduler(
            folder, **SIDES[side], client_qps=qps, client_burst=burst, extender_url=url
        )
        return localcluster.load_state(folder)["processes"]["kube-scheduler"]["pid"], time.monotonic()

    backlog = args.mode == "backlog"
    if backlog:
        localcluster.stop_scheduler(folder)
    else:
        scheduler_pid, started = start_scheduler()
    karpy_cpu = tree_cpu_seconds(karpy_pid)
    before_handler = handler_totals(metrics_url)
    watch = BindWatch(core, args.state, run, args.run_seconds + 30)
    returned: dict[str, float] = {}
    bodies = [pod(args.kind, run, i, groups) for i in range(args.pods)]
    if not backlog:
        started = time.monotonic()

    def create(i: int) -> None:
        # Unparsed: the client's model decoding would bound the create rate on 2 cores.
        response = core.create_namespaced_pod(NAMESPACE, bodies[i], _preload_content=False)
        response.read()
        response.release_conn()
        returned[bodies[i]["metadata"]["name"]] = time.monotonic()

    created, took = create_all(create, range(args.pods), deadline)
    if backlog:
        # Every pod waits: kube-scheduler's throughput alone, from its start to the last bind.
        scheduler_pid, started = start_scheduler()
        returned = dict.fromkeys(returned, started)
    while len(watch.bound) < created and time.monotonic() < deadline:
        time.sleep(0.2)
    watch.close()
    if watch.error or watch.resumed:
        why = watch.error or "no error"
        print(f"the watch of run {run}: resumed {watch.resumed} time(s), {why}", flush=True)
    scheduler_cpu = tree_cpu_seconds(scheduler_pid)  # it started with the run
    karpy_cpu = tree_cpu_seconds(karpy_pid) - karpy_cpu
    after_handler = handler_totals(metrics_url)
    bound = dict(watch.bound)
    lags = [max(at - returned[name], 0.0) for name, at in bound.items() if name in returned]
    span = (max(bound.values()) - started) if bound else float("inf")
    handler = {}
    for verb, (total, count) in after_handler.items():
        old_total, old_count = before_handler.get(verb, (0.0, 0.0))
        if count > old_count:
            handler[verb] = ((total - old_total) / (count - old_count) * 1000, count - old_count)
    return RunResult(
        side=side,
        created=created,
        scheduled=len(bound),
        create_rate=created / max(took, 1e-9),
        throughput=len(bound) / span if bound else 0.0,
        p50=percentile(lags, 0.5) if lags else float("nan"),
        p99=percentile(lags, 0.99) if lags else float("nan"),
        scheduler_cpu=scheduler_cpu,
        karpy_cpu=karpy_cpu,
        handler_ms=handler,
        load=os.getloadavg()[0],
    )


def delete_run(core: Any, run: str, seconds: float = 300.0) -> None:
    """Delete the run's pods at once (grace 0: no kubelet would ever confirm) and wait them gone."""
    selector = f"schedpath-run={run}"
    core.delete_collection_namespaced_pod(NAMESPACE, label_selector=selector, grace_period_seconds=0)
    deadline = time.monotonic() + seconds
    while core.list_namespaced_pod(NAMESPACE, label_selector=selector, limit=1).items:
        if time.monotonic() > deadline:
            print(f"pods of run {run} still there after {seconds:.0f} s", flush=True)
            return
        time.sleep(1.0)


def describe(result: RunResult) -> str:
    handler = " ".join(
        f"{verb} {ms:.2f}ms x {count:.0f}" for verb, (ms, count) in sorted(result.handler_ms.items())
    )
    return (
        f"{result.side:<12}{result.scheduled:>6}/{result.created:<6}"
        f"{result.create_rate:>9.0f}{result.throughput:>9.1f}{result.p50:>8.2f}{result.p99:>8.2f}"
        f"{result.scheduler_cpu:>8.1f}{result.karpy_cpu:>8.1f}{result.load:>7.2f}  {handler or '-'}"
    )


HEADER = (
    f"{'extender':<12}{'sched/created':>13}{'create/s':>9}{'pods/s':>9}{'p50 s':>8}{'p99 s':>8}"
    f"{'ks cpu':>8}{'karpy':>8}{'load1':>7}  karpy handler ms x calls"
)


def summary(results: list[RunResult]) -> str:
    def mean(values: list[float]) -> float:
        return sum(values) / len(values) if values else float("nan")

    lines = []
    sides: dict[str, list[RunResult]] = {}
    for result in results:
        sides.setdefault(result.side, []).append(result)
    for side, runs in sides.items():
        lines.append(
            f"mean {side:<12} {mean([r.throughput for r in runs]):.1f} pods/s, "
            f"p50 {mean([r.p50 for r in runs]):.2f} s, p99 {mean([r.p99 for r in runs]):.2f} s"
        )
    without = sides.get("without", [])
    for side, runs in sides.items():
        if side != "without" and without:
            ratio = mean([r.throughput for r in runs]) / max(mean([r.throughput for r in without]), 1e-9)
            p99 = mean([r.p99 for r in runs]) / max(mean([r.p99 for r in without]), 1e-9)
            lines.append(f"{side}/without: throughput {ratio:.2f}x, p99 {p99:.2f}x")
    return "\n".join(lines)


def sides(text: str) -> list[str]:
    names = text.split(",")
    if unknown := [n for n in names if n not in SIDES]:
        raise argparse.ArgumentTypeError(
            f"unknown side(s) {', '.join(unknown)}; choose from {', '.join(SIDES)}"
        )
    return names


def main() -> None:
    from kubernetes import client

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=2, help="rounds, each one run with and one without")
    parser.add_argument("--qps", choices=sorted(QPS), default="lifted")
    parser.add_argument("--kind", choices=("plain", "spread", "anti"), default="plain")
    parser.add_argument(
        "--mode",
        choices=("stream", "backlog"),
        default="stream",
        help="stream: pods are created while kube-scheduler runs (p50/p99: create returned -> bound); "
        "backlog: all are created first, then kube-scheduler starts (p50/p99: its start -> bound)",
    )
    parser.add_argument(
        "--sides",
        type=sides,
        default=["guarded-only", "every-pod", "without"],
        help="kube-scheduler configurations, comma-separated, alternated: guarded-only (karpy's extender "
        "as shipped: its filter, only for pods requesting karpy.sh/guarded), every-pod (filter and "
        "prioritize for every pod), filter-only (filter for every pod), noop / noop-filter (an extender "
        "that does nothing, every pod), without (no extender)",
    )
    parser.add_argument("--run-seconds", type=float, default=240.0, help="deadline of each run")
    args = parser.parse_args()
    qps, burst = QPS[args.qps]
    print(
        f"{args.nodes} nodes, {args.pods} {args.kind} pods per run, {args.runs} round(s), kube-scheduler "
        f"client QPS {args.qps} ({qps or 50}/{burst or 100}), {args.mode} mode; load average at start "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores",
        flush=True,
    )
    with local_cluster() as state:
        args.folder, args.state = state["run_dir"], state
        api = api_client(state)
        install_provisioner_crd(api)
        core = client.CoreV1Api(api)
        made, took = create_all(
            lambda i: core.create_node(node(i)), range(args.nodes), time.monotonic() + NODES_DEADLINE
        )
        print(f"created {made} nodes in {took:.0f} s", flush=True)
        core.create_namespace({"metadata": {"name": NAMESPACE}})
        log_path = Path(tempfile.gettempdir()) / f"karpy-schedpath-controller-{os.getpid()}.log"
        results: list[RunResult] = []
        noop = None
        if NOOP_SIDES.intersection(args.sides):
            noop = subprocess.Popen(
                [sys.executable, "-m", "benchmarks.noop_extender", "0"],
                stdout=subprocess.PIPE,
                text=True,
                cwd=Path(__file__).resolve().parents[1],
            )
            assert noop.stdout is not None
            args.noop_url = noop.stdout.readline().strip()
        try:
            with controller(state, log_path) as (process, port):
                if port != int(state["extender_port"]):
                    print(f"extender port {state['extender_port']} taken: kube-scheduler cannot reach karpy")
                    return
                print(f"karpy controller log: {log_path}\n{HEADER}", flush=True)
                for round_ in range(args.runs):
                    for side in args.sides if round_ % 2 == 0 else args.sides[::-1]:
                        run = f"r{round_}{side}"
                        metrics_url = f"http://127.0.0.1:{port}/metrics"
                        result = one_run(core, args, run, side, process.pid, metrics_url)
                        results.append(result)
                        print(describe(result), flush=True)
                        delete_run(core, run)
        finally:
            if noop is not None:
                noop.kill()
                noop.wait()
            if os.environ.get("KARPY_CLUSTER_STATE"):
                localcluster.restart_scheduler(Path(args.folder))
                with ThreadPoolExecutor(16) as pool:
                    list(pool.map(lambda i: core.delete_node(node(i)["metadata"]["name"]), range(made)))
                core.delete_namespace(NAMESPACE)
        print(summary(results))
        print(f"load average at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)


if __name__ == "__main__":
    main()
