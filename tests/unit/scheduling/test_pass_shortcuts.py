"""The shortcuts of a round's packing passes change no plan: the portfolio stops once the packing
it keeps costs the floor (passes.run_all), and a balanced trial fill whose ceiling cannot beat the
best first-fit one is not filled (packer._beaten). Each batch is solved with them and without them
(the floor unknown, no fill beaten) and the plans are compared whole."""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from benchmarks.packing import GIB, diverse_pods, fake_types
from extender.api.pod import Pod
from extender.api.provisioner import Provisioner
from extender.api.resources import Resources
from extender.scheduling import packer, passes
from extender.scheduling.instancetypes import InstanceType
from extender.scheduling.plan import Plan
from extender.scheduling.solver import solve
from tests.unit.scheduling.builders import catalog, make_provisioner
from tests.unit.scheduling.test_improve import raw_pod

SMALL_BATCHES = 240


def fingerprint(plan: Plan) -> str:
    nodes = [
        (n.provisioner, [t.name for t in n.options], n.zones, n.capacity_types, n.zone, n.capacity_type)
        for n in plan.nodes
    ]
    contents = [(n.price, [p.key for p in n.pods], sorted(n.labels.items())) for n in plan.nodes]
    existing = sorted((k, [p.key for p in v]) for k, v in plan.existing.items())
    unschedulable = [(u.pod.key, u.reason) for u in plan.unschedulable]
    return json.dumps(
        [nodes, contents, existing, unschedulable, plan.total_price, list(plan.notes)], default=str
    )


def provisioners(seed: int) -> list[Provisioner]:
    """Unlimited (every pass, repeated nodes), limited (as the benchmarks), or two Provisioners."""
    kind = seed % 3
    if kind == 0:
        return [make_provisioner()]
    if kind == 1:
        return [Provisioner(name="default", limits=Resources.of(cpu=10_000_000, memory=10_000_000 * GIB))]
    spot = {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}
    return [make_provisioner("spot", requirements=[spot], weight=10), make_provisioner()]


def small_batches() -> list[tuple[list[Pod], list[Provisioner], Sequence[InstanceType]]]:
    """1-10 of Karpenter's diverse pods (benchmarks/packing.py), each way of provisioning in turn:
    the limited one on Karpenter's 400 fake types (one proportion), as its benchmark, the others on
    the test catalog (many proportions; fewer types, so the configuration LP stays quick)."""
    fake, real = fake_types(), catalog()
    return [
        (
            diverse_pods(1 + seed % 10, random.Random(seed)),
            provisioners(seed),
            fake if seed % 3 == 1 else real,
        )
        for seed in range(SMALL_BATCHES)
    ]


def repeated_batches() -> list[tuple[list[Pod], list[Provisioner], Sequence[InstanceType]]]:
    """Runs of identical nodes (the greedy repeats a node without trials): two or three shapes."""
    shapes = [("2", "30Gi"), ("6", "3Gi"), ("1", "1Gi"), ("3", "9Gi")]
    batches = []
    for seed in range(12):
        rng = random.Random(seed)
        picked = rng.sample(shapes, 2 + seed % 2)
        raws = [raw_pod(f"p{k}-{i}", cpu, mem, {}) for k, (cpu, mem) in enumerate(picked) for i in range(20)]
        batches.append(([Pod.from_manifest(r) for r in raws], [make_provisioner()], catalog()))
    return batches


def counting(monkeypatch: pytest.MonkeyPatch, hits: Counter[str]) -> None:
    """Count the passes run, the fills beaten and the nodes that may repeat."""
    run, beaten, may_repeat = passes.run, packer._beaten, packer.Packer._may_repeat

    def counted_run(*args: Any) -> passes.Packing:
        hits["passes"] += 1
        return run(*args)

    def counted_beaten(*args: Any) -> Callable[[Any], bool]:
        check = beaten(*args)

        def counted(candidate: Any) -> bool:
            hits["beaten"] += check(candidate)
            return check(candidate)

        return counted

    def counted_repeat(self: packer.Packer, *args: Any) -> bool:
        found = may_repeat(self, *args)
        hits["repeat"] += found
        return found

    monkeypatch.setattr(passes, "run", counted_run)
    monkeypatch.setattr(packer, "_beaten", counted_beaten)
    monkeypatch.setattr(packer.Packer, "_may_repeat", counted_repeat)


def plans(batches: list[tuple[list[Pod], list[Provisioner], Sequence[InstanceType]]]) -> list[str]:
    return [fingerprint(solve(pods, provs, types, with_bound=False)) for pods, provs, types in batches]


@pytest.mark.parametrize("batches", [small_batches, repeated_batches])
def test_plans_are_the_same_without_the_shortcuts(
    monkeypatch: pytest.MonkeyPatch, batches: Callable[[], list]
) -> None:
    cases = batches()
    hits: Counter[str] = Counter()
    with monkeypatch.context() as patched:
        counting(patched, hits)
        fast = plans(cases)
    full: Counter[str] = Counter()
    with monkeypatch.context() as patched:
        counting(patched, full)
        patched.setattr(passes, "floor", lambda cache, classes, cursors: None)
        patched.setattr(packer, "_beaten", lambda seed, active, cursors, score: lambda candidate: False)
        slow = plans(cases)
    assert fast == slow
    # The shortcuts were taken, so the comparison means something.
    assert hits["beaten"] > 0
    if batches is small_batches:
        assert hits["passes"] < full["passes"]
    else:
        assert hits["repeat"] > 0
