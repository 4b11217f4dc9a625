"""The chaos run (issue 13): two `karpy controller` replicas with leader election behind fault
proxies (hack/localcluster/faultproxy.py), a Deployment scaled 0 -> N -> 0, the leader SIGKILLed
mid-scale-up, interruption messages sent meanwhile; then karpy's invariants are measured.

Wiring, all on 127.0.0.1 next to a running local cluster (state.json):
- apiserver proxy (plain HTTP in, the cluster's TLS + admin certificate out) faulting `api_rate` of
  requests; the replicas' kubeconfig points at it. kube-scheduler, kwok, kcm and this driver talk
  to the real apiserver.
- moto proxy faulting EC2 (`ec2_rate`, RequestLimitExceeded) and SQS (`sqs_rate`, InternalFailure)
  calls; the replicas' KARPY_AWS_ENDPOINT_URL.
- extender router on the cluster's extender port: forwards kube-scheduler to the replica whose
  /metrics says it leads (the karpy-extender Service's leader selector, locally); none during a
  failover, which kube-scheduler skips (the extender is `ignorable`).

Invariants (`Result.violations`): no instance launched that never became a Node and no two Nodes
for one instance (duplicates); at the peak every Node has a live instance; no pod pending once the
scale-up settled; after the scale to 0 and the GC grace, no live instance and no Node left
(orphans); every interruption message handled and deleted, the queue empty (lost messages); the
survivor took the Lease over. Timings are shortened through KARPY_* settings (GC grace, SQS
visibility, ttlSecondsAfterEmpty); the whole run is bounded by `Config.deadline_seconds`.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
import urllib3
import yaml

from hack.localcluster import karpyenv, procs
from hack.localcluster.awsseed import AwsSeed
from hack.localcluster.faultproxy import FaultProxy, apiserver_faults, aws_faults
from hack.localcluster.karpyenv import controller_env, install_provisioner_crd

PROVISIONER_NAME = "karpenter.sh/provisioner-name"
LIVE_STATES = ("pending", "running", "stopping", "stopped")
LEASE_NAMESPACE = "karpy"
#: Small instance types, so N pods need tens of nodes (tens of launches under faults), not two.
INSTANCE_TYPE_KEY = "node.kubernetes.io/instance-type"
INSTANCE_TYPES = ("m5.xlarge", "m5.2xlarge", "c5.xlarge", "c5.2xlarge")
IS_LEADER = re.compile(r"^karpenter_leader_election_is_leader\s+1(\.0)?\s*$", re.M)


@dataclass(frozen=True)
class Config:
    pods: int = 500
    api_rate: float = 0.05
    ec2_rate: float = 0.10
    sqs_rate: float = 0.05
    #: SIGKILL the leader once `kill_at` of the pods are bound (off: a control run without failover).
    kill_leader: bool = True
    kill_at: float = 0.3
    deadline_seconds: float = 600.0
    empty_ttl_seconds: int = 10
    gc_grace_seconds: float = 30.0
    seed: int = 13
    work_dir: Path = Path("/tmp/karpy-chaos")


@dataclass
class Result:
    figures: dict[str, Any] = field(default_factory=dict)
    faults: dict[str, int] = field(default_factory=dict)
    requests: dict[str, int] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)

    def check(self, name: str, value: int, expected: int = 0) -> None:
        self.figures[name] = value
        if value != expected:
            self.violations.append(f"{name}: {value} (want {expected})")

    def lines(self) -> list[str]:
        out = [f"{k}: {v}" for k, v in self.figures.items()]
        out += [f"requests via {k} proxy: {v}" for k, v in self.requests.items()]
        out += [f"injected {k}: {v}" for k, v in sorted(self.faults.items())]
        out += [f"replica log: {p}" for p in self.logs]
        out.append("invariants: " + ("all held" if not self.violations else "; ".join(self.violations)))
        return out


class Deadline:
    def __init__(self, seconds: float) -> None:
        self.start = time.monotonic()
        self.end = self.start + seconds

    def left(self) -> float:
        return max(0.0, self.end - time.monotonic())

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def wait_for(self, check: Callable[[], Any], limit: float, interval: float = 0.5) -> Any:
        """check() until truthy, at most `limit` s and never past the deadline; its last value."""
        until = min(self.end, time.monotonic() + limit)
        while True:
            value = check()
            if value or time.monotonic() >= until:
                return value
            time.sleep(interval)


class Replica:
    """One `karpy controller` process in its own session (so SIGKILL reaches gunicorn's worker too)."""

    def __init__(self, name: str, env: dict[str, str], log: Path) -> None:
        self.name, self.env, self.log = name, env, log
        self.metrics_url = f"http://{env['KARPY_EXTENDER_METRICS_BIND']}/metrics"
        self.extender_url = f"http://{env['KARPY_EXTENDER_BIND']}"
        self.process: Any = None

    def start(self) -> None:
        karpy = str(Path(sys.executable).with_name("karpy"))
        self.process = procs.spawn([karpy, "controller"], self.log, env=self.env, die_with_parent=True)

    def kill(self) -> None:
        with suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            procs.stop_pid(self.process.pid, timeout=20)
            with suppress(Exception):
                self.process.wait(timeout=5)

    def metrics(self) -> str:
        try:
            return requests.get(self.metrics_url, timeout=1).text
        except requests.RequestException:
            return ""

    def leads(self) -> bool:
        return bool(IS_LEADER.search(self.metrics()))

    def counter(self, name: str) -> float:
        total = 0.0
        for line in self.metrics().splitlines():
            if line.startswith(name) and not line.startswith(f"{name}_created"):
                total += float(line.rsplit(" ", 1)[1])
        return total


class Router:
    """Keeps the extender port pointed at whichever replica leads."""

    def __init__(self, replicas: list[Replica], port: int) -> None:
        self.replicas = replicas
        self.leader: Replica | None = None
        self._stop = threading.Event()
        self.proxy = FaultProxy(lambda: self.leader.extender_url if self.leader else None, port=port)
        threading.Thread(target=self._poll, name="extender-router", daemon=True).start()

    def _poll(self) -> None:
        while not self._stop.is_set():
            self.leader = next((r for r in self.replicas if r.process and r.leads()), None)
            self._stop.wait(0.3)

    def close(self) -> None:
        self._stop.set()
        self.proxy.close()


class NodeTracker:
    """Every Node of the run's Provisioner ever seen (name -> instance id), and the deleted ones."""

    def __init__(self, core: Any, provisioner: str) -> None:
        self.core, self.selector = core, f"{PROVISIONER_NAME}={provisioner}"
        self.instance_of: dict[str, str] = {}
        self.deleted: set[str] = set()
        self.live: set[str] = set()
        self._stop = threading.Event()
        threading.Thread(target=self._run, name="node-tracker", daemon=True).start()

    def _record(self, node: Any, gone: bool = False) -> None:
        name = node.metadata.name
        provider = node.spec.provider_id or ""
        if provider:
            self.instance_of[name] = provider.rsplit("/", 1)[-1]
        if gone or node.metadata.deletion_timestamp:
            self.deleted.add(name)
        if gone:
            self.live.discard(name)
        else:
            self.live.add(name)

    def _run(self) -> None:
        from kubernetes import watch

        while not self._stop.is_set():
            try:
                listed = self.core.list_node(label_selector=self.selector)
                names = set()
                for node in listed.items:
                    self._record(node)
                    names.add(node.metadata.name)
                for name in self.live - names:
                    self.live.discard(name)
                    self.deleted.add(name)
                stream = watch.Watch().stream(
                    self.core.list_node,
                    label_selector=self.selector,
                    resource_version=listed.metadata.resource_version,
                    timeout_seconds=10,
                )
                for event in stream:
                    self._record(event["object"], gone=event["type"] == "DELETED")
                    if self._stop.is_set():
                        return
            except Exception:  # a re-list covers what the broken watch missed
                self._stop.wait(0.5)

    def close(self) -> None:
        self._stop.set()


def _kubeconfig(path: Path, server: str) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "proxy", "cluster": {"server": server}}],
                "users": [{"name": "proxy", "user": {}}],
                "contexts": [{"name": "proxy", "context": {"cluster": "proxy", "user": "proxy"}}],
                "current-context": "proxy",
            }
        )
    )
    return path


def _apiserver_pool(state: dict[str, Any]) -> urllib3.PoolManager:
    pki = state["pki"]
    return urllib3.PoolManager(
        maxsize=64,
        block=False,
        cert_reqs="CERT_REQUIRED",
        ca_certs=pki["ca_cert"],
        cert_file=pki["admin_cert"],
        key_file=pki["admin_key"],
    )


def _admin(state: dict[str, Any]) -> Any:
    return karpyenv.api_client(state, pool=16)


def _ensure_namespace(core: Any, name: str) -> None:
    from kubernetes.client.exceptions import ApiException

    try:
        core.create_namespace({"metadata": {"name": name}})
    except ApiException as err:
        if err.status != 409:
            raise


def _instances(ec2: Any, provisioner: str) -> list[dict[str, Any]]:
    pages = ec2.get_paginator("describe_instances").paginate(
        Filters=[{"Name": f"tag:{PROVISIONER_NAME}", "Values": [provisioner]}]
    )
    return [i for page in pages for r in page["Reservations"] for i in r["Instances"]]


def _live_ids(ec2: Any, provisioner: str) -> set[str]:
    return {i["InstanceId"] for i in _instances(ec2, provisioner) if i["State"]["Name"] in LIVE_STATES}


def _pods(core: Any, namespace: str) -> list[Any]:
    return [p for p in core.list_namespaced_pod(namespace).items if not p.metadata.deletion_timestamp]


def _deployment(name: str, provisioner: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "nodeSelector": {PROVISIONER_NAME: provisioner},
                    "terminationGracePeriodSeconds": 0,
                    "containers": [
                        {
                            "name": "pause",
                            "image": "registry.k8s.io/pause:3.9",
                            "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}},
                        }
                    ],
                },
            },
        },
    }


def _event(source: str, detail_type: str, detail: dict[str, Any]) -> dict[str, Any]:
    return {"Source": source, "DetailType": detail_type, "Detail": json.dumps(detail)}


def _send_interruptions(seed: AwsSeed, nodes: dict[str, str]) -> dict[str, str]:
    """Spot interruption and state change (disruptive) for one node each, a rebalance
    recommendation (an Event only) for a third, a spot interruption for an instance that is not
    karpy's, and one malformed body. Returns {node: kind} of the disruptive ones."""
    names = sorted(nodes)[:3]
    events = seed.client("events")
    entries = [
        _event("aws.ec2", "EC2 Spot Instance Interruption Warning", {"instance-id": "i-0000000000000dead"})
    ]
    disruptive: dict[str, str] = {}
    for name, (detail_type, detail) in zip(
        names,
        (
            ("EC2 Spot Instance Interruption Warning", {"instance-action": "terminate"}),
            ("EC2 Instance State-change Notification", {"state": "stopping"}),
            ("EC2 Instance Rebalance Recommendation", {}),
        ),
        strict=False,
    ):
        entries.append(_event("aws.ec2", detail_type, {"instance-id": nodes[name], **detail}))
        if "Rebalance" not in detail_type:
            disruptive[name] = detail_type
    response = events.put_events(Entries=entries)
    assert response["FailedEntryCount"] == 0, response
    seed.client("sqs").send_message(QueueUrl=seed.queue_url, MessageBody='{"not": "an event"')
    return {"sent": str(len(entries) + 1), **disruptive}


def _queue_depth(seed: AwsSeed) -> int:
    attrs = seed.client("sqs").get_queue_attributes(QueueUrl=seed.queue_url, AttributeNames=["All"])[
        "Attributes"
    ]
    return int(attrs["ApproximateNumberOfMessages"]) + int(attrs["ApproximateNumberOfMessagesNotVisible"])


def _replica_env(
    state: dict[str, Any], run: str, kubeconfig: Path, moto_url: str, queue: str, config: Config
) -> dict[str, str]:
    bind, metrics = procs.free_ports(2)
    env = controller_env(state, f"127.0.0.1:{bind}")
    env.update(
        KARPY_KUBECONFIG=str(kubeconfig),
        KARPY_AWS_ENDPOINT_URL=moto_url,
        KARPY_AWS_INTERRUPTION_QUEUE=queue,
        KARPY_EXTENDER_METRICS_BIND=f"127.0.0.1:{metrics}",
        KARPY_LEADER_ELECTION_ENABLED="true",
        KARPY_LEADER_ELECTION_NAMESPACE=LEASE_NAMESPACE,
        KARPY_LEADER_ELECTION_LEASE_NAME=run,
        KARPY_LIFECYCLE_GC_GRACE_SECONDS=str(config.gc_grace_seconds),
        KARPY_LIFECYCLE_GC_INTERVAL_SECONDS="5",
        KARPY_LIFECYCLE_SQS_WAIT_SECONDS="2",
        KARPY_LIFECYCLE_SQS_VISIBILITY_SECONDS="15",
    )
    return env


@contextmanager
def _cleanup(core: Any, custom: Any, ec2: Any, run: str) -> Iterator[None]:
    """Whatever happens, leave the cluster and moto as they were: namespace, Provisioner, Nodes
    (finalizers dropped: karpy is stopped by then) and live instances of the run."""
    try:
        yield
    finally:
        with suppress(Exception):
            core.delete_namespace(run)
        with suppress(Exception):
            custom.delete_cluster_custom_object("karpenter.sh", "v1alpha5", "provisioners", run)
        with suppress(Exception):
            for node in core.list_node(label_selector=f"{PROVISIONER_NAME}={run}").items:
                core.patch_node(node.metadata.name, {"metadata": {"finalizers": None}})
                core.delete_node(node.metadata.name)
        with suppress(Exception):
            live = sorted(_live_ids(ec2, run))
            if live:
                ec2.terminate_instances(InstanceIds=live)


def run(state: dict[str, Any], config: Config, say: Callable[[str], None] = print) -> Result:
    from kubernetes import client

    deadline = Deadline(config.deadline_seconds)
    result = Result()
    rand = random.Random(config.seed)
    run_id = f"chaos-{uuid.uuid4().hex[:6]}"
    work = config.work_dir / run_id
    work.mkdir(parents=True, exist_ok=True)
    seed = AwsSeed.from_dict(state["aws"])
    ec2 = seed.client("ec2")
    api = _admin(state)
    core, apps, custom = client.CoreV1Api(api), client.AppsV1Api(api), client.CustomObjectsApi(api)
    install_provisioner_crd(api)
    _ensure_namespace(core, LEASE_NAMESPACE)
    seed.client("sqs").purge_queue(QueueUrl=seed.queue_url)

    with ExitStack() as stack:
        stack.enter_context(_cleanup(core, custom, ec2, run_id))
        api_proxy = FaultProxy(
            lambda: state["apiserver_url"],
            apiserver_faults(config.api_rate, rand),
            pool=_apiserver_pool(state),
        )
        stack.callback(api_proxy.close)
        moto_proxy = FaultProxy(lambda: seed.endpoint_url, aws_faults(config.ec2_rate, config.sqs_rate, rand))
        stack.callback(moto_proxy.close)
        kubeconfig = _kubeconfig(work / "kubeconfig", api_proxy.url)
        queue = seed.queue_url.rsplit("/", 1)[-1]
        replicas = [
            Replica(
                name,
                _replica_env(state, run_id, kubeconfig, moto_proxy.url, queue, config),
                work / f"karpy-{name}.log",
            )
            for name in ("a", "b")
        ]
        result.logs = [str(r.log) for r in replicas]
        for replica in replicas:
            stack.callback(replica.stop)
        router = Router(replicas, int(state["extender_port"]))
        stack.callback(router.close)
        nodes = NodeTracker(core, run_id)
        stack.callback(nodes.close)

        karpyenv.create_provisioner(
            api,
            run_id,
            {
                "ttlSecondsAfterEmpty": config.empty_ttl_seconds,
                "requirements": [
                    {"key": INSTANCE_TYPE_KEY, "operator": "In", "values": list(INSTANCE_TYPES)}
                ],
            },
        )
        _ensure_namespace(core, run_id)
        deadline.wait_for(lambda: core.list_namespaced_service_account(run_id).items, 30)
        apps.create_namespaced_deployment(run_id, _deployment("inflate", run_id))

        for replica in replicas:
            replica.start()
        first = deadline.wait_for(lambda: router.leader, 90)
        if first is None:
            result.violations.append("no replica became leader")
            return _finish(result, api_proxy, moto_proxy, deadline)
        say(f"{deadline.elapsed():.0f}s replica {first.name} leads; scaling to {config.pods}")
        result.figures["startup seconds"] = round(deadline.elapsed(), 1)

        # -- scale up, kill the leader mid-way --------------------------------------------------
        scale_start = time.monotonic()
        apps.patch_namespaced_deployment_scale("inflate", run_id, {"spec": {"replicas": config.pods}})

        def bound() -> int:
            return sum(1 for p in _pods(core, run_id) if p.spec.node_name)

        if config.kill_leader:
            kill_at = max(1, int(config.kill_at * config.pods))
            deadline.wait_for(lambda: bound() >= kill_at, deadline.left() * 0.4)
            result.figures["bound pods when the leader was killed"] = bound()
            _kill_leader(router, replicas, deadline, result, say)

        # -- interruption messages while the scale-up goes on -------------------------------------
        with_instances = deadline.wait_for(
            lambda: (
                {
                    n: nodes.instance_of[n]
                    for n in list(nodes.live)
                    if n in nodes.instance_of and n not in nodes.deleted
                }
                if len(nodes.live) >= 3
                else None
            ),
            60,
        )
        sent = _send_interruptions(seed, with_instances or {})
        sent_count = int(sent.pop("sent"))
        result.figures["interruption messages sent"] = sent_count
        say(f"{deadline.elapsed():.0f}s sent {sent_count} interruption messages")

        # -- settle ------------------------------------------------------------------------------
        # The interrupted nodes go first (their pods are evicted and come back pending), then the
        # scale-up has settled when every pod is Running twice in a row; pending pods are counted
        # in that last listing (or the last one before the deadline).
        deadline.wait_for(lambda: not any(n in nodes.live for n in sent), 90)
        result.check("disruptive interruption messages not acted on", sum(1 for n in sent if n in nodes.live))
        running_streak: list[int] = []

        def running() -> int:
            return sum(1 for p in _pods(core, run_id) if p.spec.node_name and p.status.phase == "Running")

        def settled() -> bool:
            running_streak.append(running())
            return running_streak[-2:] == [config.pods, config.pods]

        ok = deadline.wait_for(settled, deadline.left() * 0.6, interval=1.0)
        result.figures["scale-up seconds (0 -> all Running)"] = (
            round(time.monotonic() - scale_start, 1) if ok else None
        )
        result.check("pods pending after scale-up", config.pods - running_streak[-1])
        deadline.wait_for(lambda: _queue_depth(seed) == 0, 45, interval=1.0)
        result.check("interruption messages left in the queue", _queue_depth(seed))
        # The messages were sent after the kill: the replicas running now handled them all.
        deleted = sum(r.counter("karpenter_interruption_deleted_messages") for r in replicas)
        result.check(
            "interruption messages lost (sent - deleted after handling)", max(0, sent_count - int(deleted))
        )

        live_nodes = {n: nodes.instance_of.get(n, "") for n in list(nodes.live)}
        live = _live_ids(ec2, run_id)
        result.figures["nodes at peak"] = len(live_nodes)
        result.check(
            "nodes at peak without a live instance", sum(1 for i in live_nodes.values() if i not in live)
        )
        say(f"{deadline.elapsed():.0f}s settled: {len(live_nodes)} nodes; scaling to 0")

        # -- scale down, wait out emptiness and GC -----------------------------------------------
        down_start = time.monotonic()
        apps.patch_namespaced_deployment_scale("inflate", run_id, {"spec": {"replicas": 0}})
        gone = deadline.wait_for(
            lambda: not nodes.live and not _live_ids(ec2, run_id), deadline.left() - 20, interval=1.0
        )
        if gone:
            result.figures["scale-down seconds (to 0 nodes, 0 instances)"] = round(
                time.monotonic() - down_start, 1
            )
        # Past the GC grace, anything still live with no Node is an orphan GC failed to collect.
        time.sleep(min(5.0, deadline.left()))
        live = _live_ids(ec2, run_id)
        result.check("nodes left after scale to 0", len(nodes.live))
        result.check(
            "orphan instances after GC",
            len(live - set(nodes.instance_of[n] for n in nodes.live if n in nodes.instance_of)),
        )

        instances = _instances(ec2, run_id)
        noded = Counter(nodes.instance_of.values())
        result.figures["instances launched"] = len(instances)
        result.figures["nodes created"] = len(nodes.instance_of)
        result.check(
            "duplicate instances (launched, never a Node)",
            sum(1 for i in instances if i["InstanceId"] not in noded),
        )
        result.check("instances with more than one Node", sum(1 for c in noded.values() if c > 1))
        result.figures["garbage-collected instances"] = int(
            sum(r.counter("karpenter_garbage_collected_instances") for r in replicas)
        )
        return _finish(result, api_proxy, moto_proxy, deadline)
    raise AssertionError("unreachable")


def _kill_leader(
    router: Router, replicas: list[Replica], deadline: Deadline, result: Result, say: Callable[[str], None]
) -> None:
    """SIGKILL the leader, time the survivor's takeover, start the victim again (as the kubelet
    would; it comes back as a follower)."""
    victim = deadline.wait_for(lambda: router.leader, 15, interval=0.2) or replicas[0]
    survivor = next(r for r in replicas if r is not victim)
    victim.kill()
    killed_at = time.monotonic()
    say(f"{deadline.elapsed():.0f}s SIGKILLed leader {victim.name}")
    if deadline.wait_for(lambda: router.leader is survivor, 60, interval=0.2):
        result.figures["leader takeover seconds"] = round(time.monotonic() - killed_at, 1)
        say(f"{deadline.elapsed():.0f}s replica {survivor.name} took over")
    else:
        result.violations.append(f"replica {survivor.name} did not take the Lease over within 60s")
    victim.log = victim.log.with_name(f"karpy-{victim.name}-restarted.log")
    result.logs.append(str(victim.log))
    victim.start()


def _finish(result: Result, api_proxy: FaultProxy, moto_proxy: FaultProxy, deadline: Deadline) -> Result:
    result.figures["run seconds"] = round(deadline.elapsed(), 1)
    result.faults = {**api_proxy.faults(), **moto_proxy.faults()}
    result.requests = {"apiserver": api_proxy.counts["requests"], "moto": moto_proxy.counts["requests"]}
    return result
