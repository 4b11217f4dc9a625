"""A day of diurnal load on a diverse workload, simulated with a fake clock: what each scale-down
policy costs, and how far it stays from the cheapest shape that could hold the pods.

Policies: `emptiness` (only empty nodes are removed, karpy without consolidation: each after its
TTL, within the Provisioner's disruption budget), `karpy` (consolidation: the worker's pass, the
product's `extender.lifecycle.consolidation.decide.decide`, every `consolidation_interval_seconds`,
confirmed after the validation delay, within the default 10 % disruption budget), `karpenter` (the
same worker with Karpenter's moves only, `decide_karpenter`: empty nodes, multi-node delete,
single-node delete or replace, no re-plans), `ca`
(Cluster-Autoscaler-style: a node under 50 % of its cpu and memory for 10 minutes is removed when
its pods fit on the other nodes, one at a time; empty nodes at once).

Time runs inside each step as the controller's does (`LifecycleSettings` defaults): a pass every
10 s; a decision is re-made 15 s later and acted on only if unchanged; a replacement is launched
and the worker waits `--launch-seconds` for it to be Ready before the old nodes are deleted; a
deleted node is paid for, and holds its budget slot, `DRAIN_SECONDS` until it is gone; a node
still launching (scale-up or replacement) holds consolidation back, as `provisioner_blockers` does.
Load changes at step boundaries: ReplicaSets scale down by Kubernetes' own victim ranking
(`scale_down_victims`), and pending pods are planned with the solver onto existing nodes first.

Reported per policy: node-hours, $ over the day, and how far above two lower bounds for all
running pods on fresh nodes, integrated over the day: the solver's (the configuration LP, which may
buy a fraction of a node) and the whole-node bound (benchmarks/integerbound.py: a MIP over whole
nodes, HiGHS's dual bound, the cheapest plan itself when HiGHS finishes). Pure: no API, no clock.
Run: .venv/bin/python -m benchmarks.consolidation [--hours 12 --seeds 1,2,3,4,5 --jobs 2 --trace]
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import itertools
import json
import math
import random
import time
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from benchmarks.integerbound import integer_bound
from extender.api import labels as wk
from extender.api.disruption import DEFAULT_CONSOLIDATION_THRESHOLD, MIN_SAVINGS_ANNOTATION
from extender.api.pod import Pod
from extender.api.provisioner import Provisioner
from extender.api.provisioner_schema import load_provisioner
from extender.api.resources import Resources
from extender.lifecycle import budgets
from extender.lifecycle.consolidation import decide as consolidation
from extender.lifecycle.consolidation.eligibility import utilisation
from extender.lifecycle.consolidation.view import ClusterView, NodeState, Settings
from extender.scheduling.catalog import build_catalog
from extender.scheduling.instancetypes import InstanceType
from extender.scheduling.plan import ExistingNode
from extender.scheduling.pricing import PriceBook
from extender.scheduling.solver import solve
from extender.settings import LifecycleSettings

ROOT = Path(__file__).resolve().parents[1]
TYPES = ROOT / "tests" / "data" / "instance-types.json"
ZONES = ("us-west-2a", "us-west-2b", "us-west-2c")

App = tuple[str, str, str, int, float]
#: (name, cpu, memory, peak replicas, phase in hours): web tiers, workers, caches, batch, ML.
WORKLOAD: tuple[App, ...] = (
    ("web", "250m", "512Mi", 60, 0.0),
    ("api", "500m", "1Gi", 40, 0.5),
    ("worker", "1", "2Gi", 24, 2.0),
    ("cache", "500m", "6Gi", 10, 0.0),
    ("batch", "2", "4Gi", 12, 6.0),
    ("ml", "4", "16Gi", 4, 3.0),
)
CA_THRESHOLD = 0.5
CA_DELAY_SECONDS = 600.0
LIFECYCLE = LifecycleSettings()
SETTINGS = Settings(min_node_age_seconds=LIFECYCLE.consolidation_min_node_age_seconds)
#: From the delete to the instance gone (drain, terminate): the node is paid for and holds its
#: budget slot this long, whatever the policy; emptiness adds its TTL (Karpenter's walkthrough: 30 s).
DRAIN_SECONDS = 60.0
EMPTY_TTL_SECONDS = 30.0
#: An assumption, not a measurement: CreateFleet to node Ready on EC2 (`--launch-seconds`).
LAUNCH_SECONDS = 90.0
#: The benchmark Provisioner's only architecture (on-demand only): the whole-node bound's types.
ARCH = "amd64"


def catalog() -> list[InstanceType]:
    raw = json.loads(TYPES.read_text())["InstanceTypes"]
    return build_catalog(raw, offerings=None, zones=ZONES, prices=PriceBook())


def provisioner(consolidate: bool, budget: str = "10%", min_savings: str | None = None) -> Provisioner:
    annotations = {MIN_SAVINGS_ANNOTATION: min_savings} if min_savings is not None else {}
    return load_provisioner(
        {
            "metadata": {"name": "default", "annotations": annotations},
            "spec": {
                "requirements": [
                    {"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
                    {"key": wk.ARCH, "operator": "In", "values": [ARCH]},
                ],
                "consolidation": {"enabled": consolidate},
                "disruption": {"nodes": budget},
            },
        }
    )


def workload(seed: int, scale: float = 1.0) -> tuple[App, ...]:
    """The apps of seed `seed`: each of WORKLOAD's roles with its cpu and memory scaled by 0.5-2x
    (memory independently of cpu, so the cpu:memory mix changes too), its peak by 0.5-1.5x (then
    by `scale`) and its phase moved by up to 8 h. Seed 0 is WORKLOAD itself."""
    if seed == 0:
        return tuple((n, c, m, max(1, round(peak * scale)), ph) for n, c, m, peak, ph in WORKLOAD)
    rng = random.Random(seed)
    apps = []
    for name, cpu, memory, peak, phase in WORKLOAD:
        millis = Resources.parse({"cpu": cpu}).cpu * 1000 * rng.choice((0.5, 0.75, 1, 1.5, 2))
        mebis = Resources.parse({"memory": memory}).memory / 2**20 * rng.choice((0.5, 0.75, 1, 1.5, 2))
        apps.append(
            (
                name,
                f"{round(millis)}m",
                f"{round(mebis)}Mi",
                max(1, round(peak * rng.uniform(0.5, 1.5) * scale)),
                (phase + rng.uniform(0, 8)) % 24,
            )
        )
    return tuple(apps)


def replicas(peak: int, phase: float, hour: float) -> int:
    """Diurnal: a trough of 15 % of peak around 03:00, the peak around 15:00, shifted by `phase`."""
    load = (1 - math.cos(2 * math.pi * (hour - 3 - phase) / 24)) / 2
    return max(1, round(peak * (0.15 + 0.85 * load)))


def make_pod(app: str, cpu: str, memory: str, index: int) -> Pod:
    return Pod.from_manifest(
        {
            "metadata": {
                "name": f"{app}-{index}",
                "namespace": "default",
                "labels": {"app": app},
                "ownerReferences": [{"kind": "ReplicaSet", "name": app, "controller": True}],
            },
            "spec": {
                "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]
            },
        }
    )


def scale_down_victims(
    running: Iterable[tuple[str, Pod]], count: int, now: float, born: dict[str, tuple[float, str]]
) -> list[tuple[str, Pod]]:
    """The `count` (node, pod) pairs a ReplicaSet deletes when scaled down.

    Kubernetes pkg/controller/replicaset `getPodsToDelete` sorts by controller.ActivePodsWithRanks
    (pkg/controller/controller_utils.go) and takes the first: unassigned before assigned, Pending <
    Unknown < Running, not Ready before Ready, lower pod-deletion-cost, then more colocated pods of
    the same controller on the pod's node first (the rank), then the more recently Ready, then more
    restarts, then the newer; with LogarithmicScaleDown (default since 1.22, GA 1.31) times compare
    as floor(log2(age in ns)) and ties go by UID. Every pod here is bound, Running and Ready, with
    no deletion cost or restarts, and Ready when created: rank, log-scaled age, UID."""
    pairs = list(running)
    colocated = Counter(node for node, _ in pairs)

    def order(pair: tuple[str, Pod]) -> tuple[int, int, str]:
        created, uid = born[pair[1].key]
        age_ns = (now - created) * 1e9
        return (-colocated[pair[0]], int(math.log2(age_ns)) if age_ns > 0 else -1, uid)

    return sorted(pairs, key=order)[:count]


@dataclass
class Result:
    policy: str
    node_hours: float = 0.0
    dollars: float = 0.0
    bound_dollars: float = 0.0
    #: The whole-node bound integrated over the day (at least `bound_dollars`).
    integer_dollars: float = 0.0
    #: Of `dollars`: paid for nodes not yet Ready, and for nodes draining after their delete.
    launching_dollars: float = 0.0
    draining_dollars: float = 0.0
    actions: int = 0
    #: Nodes deleted by scale-down (each a disruption: a drain and its pods evicted).
    disrupted: int = 0
    #: Pods evicted by scale-down (the pods on the nodes it deleted).
    evicted: int = 0
    seconds: float = 0.0
    #: Wall time of each consolidation decide() call (karpy policies).
    decide_seconds: list[float] = dataclasses.field(default_factory=list)

    @property
    def serving_dollars(self) -> float:
        return self.dollars - self.launching_dollars - self.draining_dollars


@dataclass
class Life:
    """When a node was launched, is Ready, and leaves (paid for until then)."""

    born: float
    ready_at: float
    #: When its drain starts (set by `Cluster.remove`); it is gone `DRAIN_SECONDS` later.
    drain_from: float | None = None

    @property
    def leave_at(self) -> float | None:
        return None if self.drain_from is None else self.drain_from + DRAIN_SECONDS


class Cluster:
    """Nodes (NodeState) with their pods on a fake clock; new nodes come from the solver as
    provisioning plans them, and cost money from launch until they are gone."""

    def __init__(
        self, types: list[InstanceType], prov: Provisioner, result: Result, rng: random.Random
    ) -> None:
        self.types, self.prov, self.result, self.rng = types, prov, result, rng
        self.nodes: dict[str, NodeState] = {}
        self.life: dict[str, Life] = {}
        #: pod key -> (created, uid), for the ReplicaSet's scale-down ranking.
        self.born: dict[str, tuple[float, str]] = {}
        self.counter = 0
        self.clock = 0.0
        self.low_since: dict[str, float] = {}
        #: The consolidation worker is busy (validating, waiting for a replacement) until then.
        self.worker_free_at = 0.0

    # --- time ------------------------------------------------------------------------------------

    def advance(self, until: float) -> None:
        """Run the clock to `until`: pay for every node, let nodes become Ready and leave on time."""
        while True:
            due = [t for life in self.life.values() for t in (life.ready_at, life.leave_at) if t is not None]
            due = [t for t in due if self.clock < t <= until]
            at = min(due, default=until)
            self._charge(at)
            for name, life in list(self.life.items()):
                if life.leave_at is not None and life.leave_at <= at:
                    del self.nodes[name], self.life[name]
                    self.low_since.pop(name, None)
            if at >= until:
                return

    def _charge(self, until: float) -> None:
        # advance() stops at every Ready and leave time, and a drain starts at a step or when a
        # replacement is Ready, so each node is in one state over the interval.
        hours = (until - self.clock) / 3600
        for name, n in self.nodes.items():
            life, cost = self.life[name], n.price * hours
            self.result.node_hours += hours
            self.result.dollars += cost
            if self.clock < life.ready_at:
                self.result.launching_dollars += cost
            elif life.drain_from is not None and self.clock >= life.drain_from:
                self.result.draining_dollars += cost
        self.clock = until

    def next_change(self) -> float | None:
        """When the view next changes by itself: a node becomes Ready, leaves, or comes of age."""
        times = [t for life in self.life.values() for t in (life.ready_at, life.leave_at) if t is not None]
        times += [life.born + SETTINGS.min_node_age_seconds for life in self.life.values()]
        return min((t for t in times if t > self.clock), default=None)

    # --- views -----------------------------------------------------------------------------------

    def view(self) -> ClusterView:
        nodes = tuple(
            dataclasses.replace(
                n, age_seconds=self.clock - self.life[k].born, ready=self.clock >= self.life[k].ready_at
            )
            for k, n in self.nodes.items()
        )
        return ClusterView(provisioners=(self.prov,), instance_types=tuple(self.types), nodes=nodes)

    def adopt(self, view: ClusterView, ready_at: float) -> None:
        """Take the view after an action or a provisioning plan; a new node gets a fresh name and
        is Ready at `ready_at`."""
        nodes = {}
        for n in view.nodes:
            if n.name not in self.life:
                self.counter += 1
                n = dataclasses.replace(n, node=dataclasses.replace(n.node, name=f"node-{self.counter}"))
                self.life[n.name] = Life(born=self.clock, ready_at=ready_at)
            nodes[n.name] = n
        self.nodes = nodes

    def disrupting(self) -> list[str]:
        return [k for k, n in self.nodes.items() if n.disrupting]

    def remove(self, names: Iterable[str], drain_from: float) -> None:
        """The nodes take no more pods, drain from `drain_from` and are gone `DRAIN_SECONDS` later
        (paid for until then)."""
        names = set(names)
        self.result.disrupted += len(names)
        for name in names:
            self.life[name].drain_from = drain_from
        self.nodes = {
            k: dataclasses.replace(n, disrupting=True) if k in names else n for k, n in self.nodes.items()
        }

    # --- load ------------------------------------------------------------------------------------

    def scale(self, wanted: dict[str, int], shapes: dict[str, tuple[str, str]]) -> list[Pod]:
        """Delete surplus pods as each ReplicaSet picks them; return the pods to create."""
        by_app: dict[str, list[tuple[str, Pod]]] = {}
        for name, n in self.nodes.items():
            for p in n.node.pods:
                by_app.setdefault(p.labels["app"], []).append((name, p))
        pending = []
        for app, count in wanted.items():
            running = by_app.get(app, [])
            if len(running) > count:
                for name, victim in scale_down_victims(running, len(running) - count, self.clock, self.born):
                    self._remove_pod(name, victim)
            else:
                taken = {p.name for _, p in running}
                fresh = (i for i in range(10_000) if f"{app}-{i}" not in taken)
                for _ in range(count - len(running)):
                    pod = make_pod(app, *shapes[app], next(fresh))
                    self.born[pod.key] = (self.clock, f"{self.rng.getrandbits(64):016x}")
                    pending.append(pod)
        return pending

    def _remove_pod(self, name: str, pod: Pod) -> None:
        n = self.nodes[name]
        pods = tuple(p for p in n.node.pods if p.key != pod.key)
        node = dataclasses.replace(
            n.node, pods=pods, requested=n.node.requested - pod.requests, pod_count=len(pods)
        )
        self.nodes[name] = dataclasses.replace(n, node=node)
        del self.born[pod.key]

    def provision(self, pending: list[Pod], launch: float) -> None:
        if not pending:
            return
        plan = solve(
            pending,
            [self.prov],
            self.types,
            existing_nodes=[n.node for n in self.nodes.values() if not n.disrupting],
            with_bound=False,
        )
        assert not plan.unschedulable, plan.unschedulable[:1]
        view = self.view()
        for name, placed in plan.existing.items():
            view = consolidation.apply(
                view, consolidation.Action(consolidation.Method.SINGLE, (), (), {name: placed})
            )
        for i, planned in enumerate(plan.nodes):
            state = consolidation.replacement_state(planned, (), f"launching-{i}")
            view = dataclasses.replace(view, nodes=(*view.nodes, state))
        self.adopt(view, ready_at=self.clock + launch)

    def execute(self, action: consolidation.Action, launch: float) -> None:
        """The worker acts: a replacement launches now and the old nodes are deleted once it is
        Ready; evicted pods come back as new pods (their ReplicaSet recreates them)."""
        wait = launch if action.replacements else 0.0
        self.result.evicted += len(action.pods)
        self.adopt(consolidation.apply(self.view(), action), ready_at=self.clock + launch)
        self.remove(action.names, drain_from=self.clock + wait)
        for pod in action.pods:
            self.born[pod.key] = (self.clock + wait, f"{self.rng.getrandbits(64):016x}")
        self.worker_free_at = self.clock + wait


def timed_decide(cluster: Cluster, karpenter: bool = False) -> consolidation.Action | None:
    view = cluster.view()
    started = time.perf_counter()
    decide = consolidation.decide_karpenter if karpenter else consolidation.decide
    action = decide(view, SETTINGS)
    cluster.result.decide_seconds.append(time.perf_counter() - started)
    return action


def karpy_step(cluster: Cluster, end: float, launch: float, karpenter: bool = False) -> int:
    """The consolidation worker's passes until `end`: decide, wait the validation delay, decide
    again, act if the same (worker.Consolidator.reconcile, on the simulated cluster); `karpenter`:
    with Karpenter's moves only (decide.decide_karpenter)."""
    interval = LIFECYCLE.consolidation_interval_seconds
    validation = LIFECYCLE.consolidation_validation_seconds
    actions = 0
    t = max(cluster.clock, cluster.worker_free_at) + interval
    while t < end:
        cluster.advance(t)
        first = timed_decide(cluster, karpenter)
        if first is None:
            # Nothing changes until a node is Ready, leaves or comes of age: skip the idle passes.
            change = cluster.next_change()
            if change is None:
                break
            t += max(1, math.ceil((change - t) / interval)) * interval
            continue
        if t + validation >= end:
            break  # the load changes at the step boundary: this decision would not survive
        cluster.advance(t + validation)
        again = timed_decide(cluster, karpenter)
        if again is not None and first.same_as(again):
            cluster.execute(again, launch)
            actions += 1
        t = max(cluster.clock, cluster.worker_free_at) + interval
    return actions


def emptiness_step(cluster: Cluster, end: float) -> int:
    """Empty nodes go after the TTL, each as a slot of the disruption budget frees (emptiness.py)."""
    t, removed = cluster.clock + EMPTY_TTL_SECONDS, 0
    while t < end:
        cluster.advance(t)
        empty = [k for k, n in cluster.nodes.items() if not n.node.pods and not n.disrupting]
        if not empty:
            break
        free = budgets.free_by_reason(
            cluster.prov, budgets.EMPTY, len(cluster.nodes), len(cluster.disrupting()), None
        )
        cluster.remove(empty[:free], drain_from=t)
        removed += len(empty[:free])
        leaving = [cluster.life[k].leave_at or end for k in cluster.disrupting()]
        t = min(leaving, default=end)
    return removed


def ca_step(cluster: Cluster) -> int:
    """Cluster Autoscaler's rule: empty nodes go; one node under the threshold for the delay goes
    if its pods fit on the other nodes (no new node)."""
    now = cluster.clock
    empty = {name for name, n in cluster.nodes.items() if not n.node.pods and not n.disrupting}
    cluster.remove(empty, drain_from=now)
    removed = len(empty)
    for name, n in cluster.nodes.items():
        if n.disrupting:
            continue
        if utilisation(n) < CA_THRESHOLD:
            cluster.low_since.setdefault(name, now)
        else:
            cluster.low_since.pop(name, None)
    due = sorted(
        (since, name)
        for name, since in cluster.low_since.items()
        if name in cluster.nodes and not cluster.nodes[name].disrupting and now - since >= CA_DELAY_SECONDS
    )
    for _, name in due:
        others = [n.node for k, n in cluster.nodes.items() if k != name and not n.disrupting]
        plan = solve(
            list(cluster.nodes[name].node.pods),
            [cluster.prov],
            cluster.types,
            existing_nodes=others,
            with_bound=False,
        )
        if plan.unschedulable or plan.nodes:
            continue
        gone = cluster.nodes[name]
        action = consolidation.Action(consolidation.Method.SINGLE, (gone,), (), dict(plan.existing))
        cluster.execute(action, launch=0.0)
        cluster.low_since.pop(name, None)
        return removed + 1
    return removed


def wanted_at(apps: tuple[App, ...], hour: float) -> dict[str, int]:
    return {app: replicas(peak, phase, hour) for app, _, _, peak, phase in apps}


Curve = list[tuple[float, float, float, float]]


def bound_curve(
    hours: float,
    every: float,
    types: list[InstanceType],
    apps: tuple[App, ...] = WORKLOAD,
    integer_seconds: float = 0.0,
) -> tuple[Curve, list[bool]]:
    """(hour, $/h lower bound, $/h of a from-scratch plan, $/h whole-node bound) for the pods
    wanted then, sampled every `every` hours: the pods are the same for every policy, so the curve
    is computed once. Sampled every step it is exact (the pods change only at steps); coarser, it
    is interpolated, which is no bound between samples (seed 4: 10.9 % over the LP bound sampled
    hourly, 10.4 % every step). The from-scratch plan is what packing
    alone achieves, ignoring disruption: no policy that moves pods can do much better. The
    whole-node bound gets `integer_seconds` of HiGHS per sample (0: the LP bound stands in).
    Returned with, per whole-node sample, whether HiGHS finished (the bound is then the cheapest
    plan)."""
    prov = provisioner(consolidate=False)
    shapes = {app: (cpu, mem) for app, cpu, mem, _, _ in apps}
    allowed = [t for t in types if t.arch == ARCH]
    points = []
    proved = []
    for i in range(int(hours / every) + 1):
        hour = i * every
        pods = [make_pod(app, *shapes[app], k) for app, n in wanted_at(apps, hour).items() for k in range(n)]
        plan = solve(pods, [prov], types)
        whole = plan.lower_bound
        if integer_seconds > 0:
            found = integer_bound(pods, allowed, ["on-demand"], plan.total_price, integer_seconds)
            whole = max(whole, found.bound)
            proved.append(found.proved)
        points.append((hour, plan.lower_bound, plan.total_price, whole))
    return points, proved


def interpolate(curve: Curve, hour: float, column: int = 1) -> float:
    for a, b in itertools.pairwise(curve):
        if a[0] <= hour <= b[0]:
            return a[column] + (b[column] - a[column]) * (hour - a[0]) / (b[0] - a[0])
    return curve[-1][column]


def simulate(
    policy: str,
    *,
    hours: float,
    step: float,
    seed: int,
    types: list[InstanceType],
    bound: Curve,
    launch: float = LAUNCH_SECONDS,
    apps: tuple[App, ...] | None = None,
    trace: bool = False,
) -> Result:
    """`policy`: emptiness, ca, karpy[@budget] (consolidation under that disruption budget),
    balanced[@budget] (the same with the pool's `consolidationPolicy: Balanced`, k = 2) or
    karpenter[@budget] (the same worker with Karpenter's moves only and no savings threshold, as
    Karpenter's WhenEmptyOrUnderutilized). `apps`: the workload (default: `workload(seed)`).
    `trace`: print, at the end of each step, the $/h of the nodes serving against the from-scratch
    plan's (interpolated as the bounds are: sample every step for the exact figure)."""
    policy, _, budget = policy.partition("@")
    budget = budget or "10%"
    apps = apps if apps is not None else workload(seed)
    started = time.perf_counter()
    consolidating = policy in ("karpy", "karpenter", "balanced")
    prov = provisioner(
        consolidate=consolidating, budget=budget, min_savings="0" if policy == "karpenter" else None
    )
    if policy == "balanced":
        prov = dataclasses.replace(prov, consolidation_threshold=DEFAULT_CONSOLIDATION_THRESHOLD)
    result = Result(f"{policy}@{budget}" if consolidating else policy)
    cluster = Cluster(types, prov, result, random.Random(seed))
    shapes = {app: (cpu, mem) for app, cpu, mem, _, _ in apps}
    now = 0.0
    while now < hours * 3600:
        hour = now / 3600
        cluster.advance(now)
        wanted = wanted_at(apps, hour)
        cluster.provision(cluster.scale(wanted, shapes), launch)
        if policy == "emptiness":
            result.actions += emptiness_step(cluster, now + step)
        elif consolidating:
            result.actions += karpy_step(cluster, now + step, launch, karpenter=policy == "karpenter")
        elif policy == "ca":
            result.actions += ca_step(cluster)
        result.bound_dollars += interpolate(bound, hour) * step / 3600
        result.integer_dollars += interpolate(bound, hour, column=3) * step / 3600
        if trace:
            serving = sum(n.price for n in cluster.nodes.values() if not n.disrupting)
            scratch = interpolate(bound, hour, column=2)
            print(
                f"  {result.policy} {hour:5.2f} h: {sum(wanted.values())} pods,"
                f" serving ${serving:.3f}/h, from scratch ${scratch:.3f}/h"
                f" ({(serving / scratch - 1) * 100:+.1f} %), {result.actions} actions so far"
            )
        now += step
    cluster.advance(now)
    result.seconds = time.perf_counter() - started
    return result


#: Instance types of the latency benchmark's clusters (a mixed fleet, as a day of launches leaves).
LATENCY_TYPES = ("m5.large", "m5.xlarge", "m5.2xlarge", "c5.xlarge", "c5.2xlarge", "r5.large", "r5.xlarge")


def fragmented_view(count: int, seed: int, types: list[InstanceType], budget: str = "10%") -> ClusterView:
    """`count` nodes of a mixed fleet, each filled with the seed's pods to a random 15-90 % of its
    cpu or memory, as a scale-down leaves a cluster: what decide() faces at that size."""
    rng = random.Random(seed)
    apps = workload(seed)
    by_name = {t.name: t for t in types}
    prov = provisioner(consolidate=True, budget=budget)
    nodes = []
    serial = itertools.count()
    for i in range(count):
        it = by_name[rng.choice(LATENCY_TYPES)]
        zone = ZONES[i % len(ZONES)]
        price = consolidation.offering_price(it, wk.CAPACITY_TYPE_ON_DEMAND, (zone,)) or 0.0
        target, pods, used = rng.uniform(0.15, 0.9), [], Resources()
        for _ in range(100):  # draws; a pod that would pass the target is not placed
            name, cpu, memory, _, _ = rng.choice(apps)
            pod = make_pod(name, cpu, memory, next(serial))
            after = used + pod.requests
            if after.cpu <= it.allocatable.cpu * target and after.memory <= it.allocatable.memory * target:
                pods.append(pod)
                used = after
        labels = {**it.labels(), wk.HOSTNAME: f"node-{i}", wk.ZONE: zone}
        labels |= {wk.CAPACITY_TYPE: wk.CAPACITY_TYPE_ON_DEMAND, wk.PROVISIONER_NAME: prov.name}
        node = ExistingNode(
            name=f"node-{i}",
            provisioner=prov.name,
            instance_type=it.name,
            labels=labels,
            taints=(),
            allocatable=it.allocatable,
            requested=used,
            pod_count=len(pods),
            pods=tuple(pods),
        )
        nodes.append(
            NodeState(node=node, price=price, capacity_type=wk.CAPACITY_TYPE_ON_DEMAND, age_seconds=3600)
        )
    return ClusterView(provisioners=(prov,), instance_types=tuple(types), nodes=tuple(nodes))


class GcClock:
    """CPU seconds the garbage collector ran, per generation, while installed (gc.callbacks): a
    full (generation 2) collection walks every object of the process, so it lands on whichever
    call triggers it, and the latency figures say how much of them it was."""

    def __init__(self) -> None:
        self.seconds = [0.0, 0.0, 0.0]
        self.collections = [0, 0, 0]
        self._started = 0.0

    def __enter__(self) -> GcClock:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *_: object) -> None:
        gc.callbacks.remove(self._callback)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.process_time()
        else:
            self.seconds[info["generation"]] += time.process_time() - self._started
            self.collections[info["generation"]] += 1


@dataclass
class Latency:
    """Wall and CPU seconds of each decide() call, and of its CPU the full collections' share."""

    wall: list[float] = dataclasses.field(default_factory=list)
    cpu: list[float] = dataclasses.field(default_factory=list)
    full_gc: list[float] = dataclasses.field(default_factory=list)


def decide_latency(count: int, seed: int, types: list[InstanceType], rounds: int) -> Latency:
    """Wall and CPU seconds of each decide() call while the worker takes `rounds` actions one after
    another on a `count`-node cluster (each action applied and its nodes gone before the next
    decision; each decision made twice, as the worker re-decides after the validation delay)."""
    view, found = fragmented_view(count, seed, types), Latency()
    for _ in range(rounds):
        action = None
        for _ in range(2):
            # Fresh NodeStates, as the worker reads the cluster anew for each decision (no caches).
            view = dataclasses.replace(view, nodes=tuple(dataclasses.replace(n) for n in view.nodes))
            with GcClock() as collector:
                started, used = time.perf_counter(), time.process_time()
                action = consolidation.decide(view, SETTINGS)
                found.wall.append(time.perf_counter() - started)
                found.cpu.append(time.process_time() - used)
            found.full_gc.append(collector.seconds[2])
        if action is None:
            break
        # The removed nodes are gone by the next action (their budget slots free again).
        after = consolidation.apply(view, action)
        view = dataclasses.replace(after, nodes=tuple(n for n in after.nodes if not n.disrupting))
    return found


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)] if ordered else float("nan")


def print_seed(seed: int, apps: tuple[App, ...], results: list[Result], fresh: float, hours: float) -> None:
    print(f"\nseed {seed}: " + ", ".join(f"{n} {c}/{m} x{peak}" for n, c, m, peak, _ in apps))
    header = (
        "policy",
        "node-h",
        "$",
        "LP bound $",
        "vs LP",
        "whole $",
        "vs whole",
        "actions",
        "nodes",
        "evicted",
        "sim s",
    )
    print("{:<15} {:>8} {:>9} {:>10} {:>8} {:>9} {:>9} {:>8} {:>6} {:>8} {:>6}".format(*header))
    for r in results:
        print(
            f"{r.policy:<15} {r.node_hours:>8.1f} {r.dollars:>9.2f} {r.bound_dollars:>10.2f}"
            f" {gap(r) * 100:>7.1f}% {r.integer_dollars:>9.2f} {gap(r, whole=True) * 100:>8.1f}%"
            f" {r.actions:>8} {r.disrupted:>6} {r.evicted:>8} {r.seconds:>6.1f}"
        )
    if results and results[0].bound_dollars:
        lp, whole = results[0].bound_dollars, results[0].integer_dollars
        print(
            f"re-planning every pod from scratch: ${fresh:.2f}, {(fresh / lp - 1) * 100:.1f}% over the LP"
            f" bound, {(fresh / whole - 1) * 100:.1f}% over the whole-node bound"
        )
    for r in results:
        transitions = r.launching_dollars + r.draining_dollars
        print(
            f"  {r.policy:<13} serving ${r.serving_dollars:.2f}, launching ${r.launching_dollars:.2f},"
            f" draining ${r.draining_dollars:.2f} (scratch plan + these transitions"
            f" ${fresh + transitions:.2f})"
        )


def gap(r: Result, whole: bool = False) -> float:
    """How far above a bound the policy's day cost: the LP bound, or (`whole`) the whole-node one."""
    bound = r.integer_dollars if whole else r.bound_dollars
    return r.dollars / bound - 1 if bound else float("nan")


def print_summary(runs: dict[int, list[Result]]) -> None:
    """Per policy over the seeds: mean and worst % over each bound, total actions and evictions."""
    print(f"\nsummary over {len(runs)} seed(s) {sorted(runs)}")
    header = ("policy", "mean vs LP", "worst", "mean vs whole", "worst", "actions", "evicted", "per action")
    print("{:<15} {:>10} {:>7} {:>13} {:>7} {:>8} {:>8} {:>14}".format(*header))
    policies = [r.policy for r in next(iter(runs.values()))]
    for policy in policies:
        rs = [r for results in runs.values() for r in results if r.policy == policy]
        lp, whole = [gap(r) * 100 for r in rs], [gap(r, whole=True) * 100 for r in rs]
        actions, evicted = sum(r.actions for r in rs), sum(r.evicted for r in rs)
        per = f"{evicted / actions:.1f}" if actions else "-"
        print(
            f"{policy:<15} {sum(lp) / len(lp):>9.1f}% {max(lp):>6.1f}% {sum(whole) / len(whole):>12.1f}%"
            f" {max(whole):>6.1f}% {actions:>8} {evicted:>8} {per:>14}"
        )
    for policy in policies:
        ms = [
            1000 * t
            for results in runs.values()
            for r in results
            if r.policy == policy
            for t in r.decide_seconds
        ]
        if ms:
            print(
                f"{policy} decide() over the day: {len(ms)} calls, p50 {percentile(ms, 0.5):.0f} ms,"
                f" p99 {percentile(ms, 0.99):.0f} ms, max {max(ms):.0f} ms"
            )


Day = tuple[int, float, list[bool], tuple[App, ...], list[Result], float]


def one_seed(seed: int, args: argparse.Namespace) -> Day:
    """The day of seed `seed` under every policy: (seed, seconds the bounds took, whether HiGHS
    finished each whole-node sample, apps, results, $ of the from-scratch plan)."""
    types, apps = catalog(), workload(seed)
    started = time.perf_counter()
    curve, proved = bound_curve(args.hours, args.bound_minutes / 60, types, apps, args.integer_seconds)
    took = time.perf_counter() - started
    results = [
        simulate(
            p,
            hours=args.hours,
            step=args.step_minutes * 60,
            seed=seed,
            types=types,
            bound=curve,
            launch=args.launch_seconds,
            apps=apps,
            trace=args.trace,
        )
        for p in args.policies.split(",")
    ]
    steps = [i * args.step_minutes / 60 for i in range(int(args.hours * 60 / args.step_minutes))]
    fresh = sum(interpolate(curve, h, column=2) for h in steps) * args.step_minutes / 60
    return seed, took, proved, apps, results, fresh


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--step-minutes", type=float, default=5.0)
    parser.add_argument("--seeds", default="1,2,3,4,5", help="workloads (seed 0: the fixed WORKLOAD)")
    parser.add_argument(
        "--bound-minutes",
        type=float,
        default=None,
        help="bounds' sampling interval (default: every step, exact; coarser is faster, interpolated)",
    )
    parser.add_argument(
        "--integer-seconds",
        type=float,
        default=120.0,
        help="HiGHS time per sample of the whole-node bound (0: the LP bound stands in)",
    )
    parser.add_argument("--policies", default="emptiness,karpenter,karpy,balanced")
    parser.add_argument("--trace", action="store_true", help="print each step's $/h against from scratch")
    parser.add_argument("--launch-seconds", type=float, default=LAUNCH_SECONDS, help="CreateFleet to Ready")
    parser.add_argument(
        "--latency-nodes", default="100,1000", help="cluster sizes to time decide() at ('' skips)"
    )
    parser.add_argument("--latency-rounds", type=int, default=10, help="actions taken per latency cluster")
    parser.add_argument("--jobs", type=int, default=1, help="seeds simulated in parallel processes")
    args = parser.parse_args()
    if args.bound_minutes is None:
        args.bound_minutes = args.step_minutes
    types = catalog()
    seeds = [int(x) for x in args.seeds.split(",") if x]
    runs: dict[int, list[Result]] = {}
    day = partial(one_seed, args=args)
    with ProcessPoolExecutor(max_workers=args.jobs) if args.jobs > 1 else nullcontext() as pool:
        for seed, took, proved, apps, results, fresh in pool.map(day, seeds) if pool else map(day, seeds):
            print(f"seed {seed}: lower bounds sampled every {args.bound_minutes:g} min in {took:.0f}s")
            if proved:
                print(f"  whole-node bound: the cheapest plan at {sum(proved)} of {len(proved)} samples")
            runs[seed] = results
            print_seed(seed, apps, results, fresh, args.hours)
    if runs:
        print_summary(runs)
    for count in (int(x) for x in args.latency_nodes.split(",") if x):
        found = decide_latency(count, (seeds or [1])[0], types, args.latency_rounds)
        for what, values in (("wall", found.wall), ("cpu", found.cpu)):
            ms = [1000 * t for t in values]
            print(
                f"decide() at {count} nodes ({what}): {len(ms)} calls, p50 {percentile(ms, 0.5):.0f} ms,"
                f" p99 {percentile(ms, 0.99):.0f} ms, max {max(ms):.0f} ms"
            )
        hit = [1000 * t for t in found.full_gc if t > 0]
        slowest = max(range(len(found.cpu)), key=found.cpu.__getitem__)
        print(
            f"  of that cpu, full garbage collections: {len(hit)} call(s), {sum(hit):.0f} ms"
            f" ({', '.join(f'{t:.0f}' for t in hit) or '-'}); the slowest call"
            f" {1000 * found.cpu[slowest]:.0f} ms, of which {1000 * found.full_gc[slowest]:.0f} ms"
        )


if __name__ == "__main__":
    main()
