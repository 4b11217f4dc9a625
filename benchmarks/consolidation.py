"""A day of diurnal load on a diverse workload, simulated with a fake clock: what each scale-down
policy costs, and how far it stays from the cheapest shape that could hold the pods.

Policies: `emptiness` (only empty nodes are removed, karpy without consolidation), `karpy`
(consolidation: `extender.lifecycle.consolidation.decide.plan` every step, within the default
10 % disruption budget), `ca` (Cluster-Autoscaler-style: a node under 50 % of its cpu and memory
for 10 minutes is removed when its pods fit on the other nodes, one at a time; empty nodes at once).
Scale-up is the same for all: pending pods are planned with the solver onto existing nodes first.

Reported per policy: node-hours, $ over the day, and $·h above the lower bound (the solver's LP
bound for all running pods on fresh nodes, integrated over the day). Pure: no API, no clock.
Run: .venv/bin/python -m benchmarks.consolidation [--hours 24 --step-minutes 5 --seed 7]
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from extender.api import labels as wk
from extender.api.pod import Pod
from extender.api.provisioner import Provisioner, load_provisioner
from extender.lifecycle.consolidation import decide as consolidation
from extender.lifecycle.consolidation.eligibility import utilisation
from extender.lifecycle.consolidation.view import ClusterView, NodeState
from extender.scheduling.catalog import build_catalog
from extender.scheduling.instancetypes import InstanceType
from extender.scheduling.pricing import PriceBook
from extender.scheduling.solver import solve

ROOT = Path(__file__).resolve().parents[1]
TYPES = ROOT / "tests" / "data" / "instance-types.json"
PRICES = ROOT.parents[1] / "shared" / "data" / "ec2-on-demand-prices.json"
ZONES = ("us-west-2a", "us-west-2b", "us-west-2c")

#: (name, cpu, memory, peak replicas, phase in hours): web tiers, workers, caches, batch, ML.
WORKLOAD = (
    ("web", "250m", "512Mi", 60, 0.0),
    ("api", "500m", "1Gi", 40, 0.5),
    ("worker", "1", "2Gi", 24, 2.0),
    ("cache", "500m", "6Gi", 10, 0.0),
    ("batch", "2", "4Gi", 12, 6.0),
    ("ml", "4", "16Gi", 4, 3.0),
)
CA_THRESHOLD = 0.5
CA_DELAY_SECONDS = 600.0
#: A removed node is paid for this long after the decision (drain and terminate), whatever the policy;
#: emptiness adds its TTL (Karpenter's walkthrough: 30 s).
REMOVAL_SECONDS = 60.0
EMPTY_TTL_SECONDS = 30.0


def catalog() -> list[InstanceType]:
    prices = PriceBook.from_file(PRICES) if PRICES.exists() else PriceBook()
    raw = json.loads(TYPES.read_text())["InstanceTypes"]
    return build_catalog(raw, offerings=None, zones=ZONES, prices=prices)


def provisioner(consolidate: bool, budget: str = "10%") -> Provisioner:
    return load_provisioner(
        {
            "metadata": {"name": "default"},
            "spec": {
                "requirements": [
                    {"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
                    {"key": wk.ARCH, "operator": "In", "values": ["amd64"]},
                ],
                "consolidation": {"enabled": consolidate},
                "disruption": {"nodes": budget},
            },
        }
    )


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


@dataclass
class Result:
    policy: str
    node_hours: float = 0.0
    dollars: float = 0.0
    bound_dollars: float = 0.0
    actions: int = 0
    seconds: float = 0.0

    @property
    def over_bound(self) -> float:
        return self.dollars - self.bound_dollars


class Cluster:
    """Nodes (NodeState) with their pods; new nodes come from the solver as provisioning plans them."""

    def __init__(self, types: list[InstanceType], prov: Provisioner) -> None:
        self.types, self.prov = types, prov
        self.nodes: dict[str, NodeState] = {}
        self.counter = 0
        self.low_since: dict[str, float] = {}

    def view(self) -> ClusterView:
        return ClusterView(
            provisioners=(self.prov,), instance_types=tuple(self.types), nodes=tuple(self.nodes.values())
        )

    def pods(self) -> list[Pod]:
        return [p for n in self.nodes.values() for p in n.node.pods]

    def tick(self, seconds: float) -> None:
        self.nodes = {
            k: dataclasses.replace(n, age_seconds=n.age_seconds + seconds)
            for k, n in self.nodes.items()
            if not n.disrupting
        }

    def scale(self, wanted: dict[str, int], make: Callable[[str, int], Pod], rng: random.Random) -> list[Pod]:
        """Remove surplus pods (random victims, as a ReplicaSet picks); return the pods to create."""
        by_app: dict[str, list[tuple[str, Pod]]] = {}
        for name, n in self.nodes.items():
            for p in n.node.pods:
                by_app.setdefault(p.labels["app"], []).append((name, p))
        pending = []
        for app, count in wanted.items():
            running = by_app.get(app, [])
            if len(running) > count:
                for name, victim in rng.sample(running, len(running) - count):
                    self._remove(name, victim)
            else:
                taken = {p.name for _, p in running}
                fresh = (i for i in range(10_000) if f"{app}-{i}" not in taken)
                pending += [make(app, next(fresh)) for _ in range(count - len(running))]
        return pending

    def _remove(self, name: str, pod: Pod) -> None:
        n = self.nodes[name]
        pods = tuple(p for p in n.node.pods if p.key != pod.key)
        node = dataclasses.replace(
            n.node, pods=pods, requested=n.node.requested - pod.requests, pod_count=len(pods)
        )
        self.nodes[name] = dataclasses.replace(n, node=node)

    def provision(self, pending: list[Pod]) -> None:
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
                view, consolidation.Action(consolidation.Method.SINGLE, (), None, {name: placed})
            )
        self.nodes = {n.name: n for n in view.nodes}
        for planned in plan.nodes:
            self.counter += 1
            state = consolidation.replacement_state(planned, (), f"node-{self.counter}")
            self.nodes[state.name] = state

    def adopt(self, view: ClusterView) -> None:
        """Take the view after consolidation actions; a replacement gets a fresh name."""
        nodes = {}
        for n in view.nodes:
            if n.name.startswith("replacement-"):
                self.counter += 1
                n = dataclasses.replace(n, node=dataclasses.replace(n.node, name=f"node-{self.counter}"))
            nodes[n.name] = n
        self.nodes = nodes

    def remove(self, names: set[str]) -> None:
        """The nodes leave: paid for until drained (`REMOVAL_SECONDS`), then gone at the next tick."""
        self.nodes = {
            k: dataclasses.replace(n, disrupting=True) if k in names else n for k, n in self.nodes.items()
        }

    def charge(self, step: float, result: Result, extra: float = 0.0) -> None:
        """Node-hours and $ of one step: live nodes the whole step, leaving ones until drained."""
        for n in self.nodes.values():
            hours = min(step, REMOVAL_SECONDS + extra) / 3600 if n.disrupting else step / 3600
            result.node_hours += hours
            result.dollars += n.price * hours


def ca_scale_down(cluster: Cluster, now: float) -> int:
    """Cluster Autoscaler's rule: empty nodes go; one node under the threshold for the delay goes
    if its pods fit on the other nodes (no new node)."""
    empty = {name for name, n in cluster.nodes.items() if not n.node.pods and not n.disrupting}
    cluster.remove(empty)
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
        if name in cluster.nodes and now - since >= CA_DELAY_SECONDS
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
        view = cluster.view()
        gone = cluster.nodes[name]
        view = consolidation.apply(
            view, consolidation.Action(consolidation.Method.SINGLE, (gone,), None, dict(plan.existing))
        )
        cluster.adopt(view)
        cluster.low_since.pop(name, None)
        return removed + 1
    return removed


def wanted_at(hour: float) -> dict[str, int]:
    return {app: replicas(peak, phase, hour) for app, _, _, peak, phase in WORKLOAD}


Curve = list[tuple[float, float, float]]


def bound_curve(hours: float, every: float, types: list[InstanceType]) -> Curve:
    """(hour, $/h lower bound, $/h of a from-scratch plan) for the pods wanted then, sampled every
    `every` hours: the pods are the same for every policy, and one bound costs seconds, so it is
    computed once and interpolated. The from-scratch plan is what packing alone achieves, ignoring
    disruption: no policy that moves pods can do much better."""
    prov = provisioner(consolidate=False)
    shapes = {app: (cpu, mem) for app, cpu, mem, _, _ in WORKLOAD}
    points = []
    for i in range(int(hours / every) + 1):
        hour = i * every
        pods = [make_pod(app, *shapes[app], k) for app, n in wanted_at(hour).items() for k in range(n)]
        plan = solve(pods, [prov], types)
        points.append((hour, plan.lower_bound, plan.total_price))
    return points


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
) -> Result:
    """`policy`: emptiness, ca, or karpy[@budget] (consolidation under that disruption budget)."""
    policy, _, budget = policy.partition("@")
    budget = budget or "10%"
    started = time.perf_counter()
    rng = random.Random(seed)
    prov = provisioner(consolidate=policy == "karpy", budget=budget)
    cluster = Cluster(types, prov)
    shapes = {app: (cpu, mem) for app, cpu, mem, _, _ in WORKLOAD}
    result = Result(policy if policy != "karpy" else f"karpy@{budget}")
    now = 0.0
    while now < hours * 3600:
        hour = now / 3600
        pending = cluster.scale(wanted_at(hour), lambda app, i: make_pod(app, *shapes[app], i), rng)
        cluster.provision(pending)
        if policy == "emptiness":
            empty = {k for k, n in cluster.nodes.items() if not n.node.pods}
            result.actions += len(empty)
            cluster.remove(empty)
        elif policy == "karpy":
            view = cluster.view()
            for action in consolidation.plan(view):
                view = consolidation.apply(view, action)
                result.actions += 1
            cluster.adopt(view)
        elif policy == "ca":
            result.actions += ca_scale_down(cluster, now)
        cluster.charge(step, result, EMPTY_TTL_SECONDS if policy == "emptiness" else 0.0)
        result.bound_dollars += interpolate(bound, hour) * step / 3600
        cluster.tick(step)
        now += step
    result.seconds = time.perf_counter() - started
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--step-minutes", type=float, default=5.0)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--bound-minutes", type=float, default=30.0, help="lower-bound sampling interval")
    parser.add_argument("--policies", default="emptiness,karpy,karpy@50%,karpy@100%,ca")
    args = parser.parse_args()
    types = catalog()
    started = time.perf_counter()
    curve = bound_curve(args.hours, args.bound_minutes / 60, types)
    print(f"lower bound sampled every {args.bound_minutes:g} min in {time.perf_counter() - started:.0f}s")
    results = [
        simulate(p, hours=args.hours, step=args.step_minutes * 60, seed=args.seed, types=types, bound=curve)
        for p in args.policies.split(",")
    ]
    steps = [i * args.step_minutes / 60 for i in range(int(args.hours * 60 / args.step_minutes))]
    fresh = sum(interpolate(curve, h, column=2) for h in steps) * args.step_minutes / 60
    header = ("policy", "node-h", "$", "bound $", "$ over bound", "vs bound", "actions", "sim s")
    print("{:<11} {:>8} {:>9} {:>9} {:>13} {:>9} {:>8} {:>6}".format(*header))
    for r in results:
        gap = r.dollars / r.bound_dollars - 1 if r.bound_dollars else float("nan")
        print(
            f"{r.policy:<11} {r.node_hours:>8.1f} {r.dollars:>9.2f} {r.bound_dollars:>9.2f}"
            f" {r.over_bound:>13.2f} {gap * 100:>8.1f}% {r.actions:>8} {r.seconds:>6.1f}"
        )
    bound_total = results[0].bound_dollars if results else 0.0
    if bound_total:
        print(
            f"re-planning every pod from scratch (no disruption cost): ${fresh:.2f}, "
            f"{(fresh / bound_total - 1) * 100:.1f}% over the bound"
        )
    by = {r.policy: r for r in results}
    for name in (r.policy for r in results if r.policy.startswith("karpy")):
        for other in ("emptiness", "ca"):
            if other in by:
                saving = 1 - by[name].dollars / by[other].dollars
                print(f"{name} vs {other}: {saving * 100:.1f}% cheaper")


if __name__ == "__main__":
    main()
