"""Plan fingerprints: one line per solver scenario, to prove a refactor leaves every plan as it was.

Scenarios, each solved as its source solves it:
- `rulecheck/<seed>`: the rule checker's random workloads (tests/unit/scheduling/test_rule_checker.py,
  seeds 0-399, solved without the checker);
- `cost/<workload>`: benchmarks.cost's families, 50 random mixes and its 5,000-pod workload on moto's
  catalog;
- `packing/<pods>` and `diverse5/<seed>`: benchmarks.packing's diverse pods on its 400 fake types, at
  1, 5, 100, 1,000 and 5,000 pods, and 5 pods with seeds 0-49;
- `test/<node id>#<call>`: every solve() call of the unit tests in tests/unit/scheduling (the ported
  Karpenter suites among them; the random rule-checker test is the `rulecheck` section), run in this
  process with Hypothesis derandomized.

A line: `name hash nodes $/h`. The hash covers each new node (Provisioner, cheapest option, zone,
capacity type, the zones and capacity types it may take, its pods), the pods placed on existing
nodes per node, the unschedulable pods and the bind phases; new nodes are sorted, so it does not
depend on their order. Pod keys are the scenarios' own names, stable from run to run.

Run: .venv/bin/python -m benchmarks.fingerprint --out FILE [--only SECTION ...]; compare two files
with `diff`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from extender.scheduling import solver as solver_module
from extender.scheduling.plan import Plan

SECTIONS = ("rulecheck", "cost", "packing", "test")
RULECHECK_SEEDS = range(400)
PACKING_SIZES = (1, 5, 100, 1_000, 5_000)
DIVERSE_SEEDS = range(50)
#: The unit test the `rulecheck` section replays without its checker.
RANDOM_RULECHECK_TEST = (
    "tests/unit/scheduling/test_rule_checker.py::"
    "test_random_workloads_break_no_rule_and_leave_no_pod_unjustly_unschedulable"
)

Line = tuple[str, str]


def canonical(plan: Plan) -> dict[str, Any]:
    """The plan as plain data, independent of the order of its new nodes."""
    nodes = sorted(
        [
            node.provisioner,
            node.instance_type.name if node.options else "",
            node.zone,
            node.capacity_type,
            sorted(node.zones),
            sorted(node.capacity_types),
            sorted(p.key for p in node.pods),
        ]
        for node in plan.nodes
    )
    return {
        "nodes": nodes,
        "existing": {
            name: sorted(p.key for p in pods) for name, pods in sorted(plan.existing.items()) if pods
        },
        "unschedulable": sorted(u.pod.key for u in plan.unschedulable),
        "phases": dict(sorted(plan.bind_phases.items())),
        "price": round(plan.total_price, 6),
    }


def line(name: str, plan: Plan) -> Line:
    digest = hashlib.sha256(json.dumps(canonical(plan), sort_keys=True).encode()).hexdigest()[:16]
    return name, f"{digest} {len(plan.nodes)} {plan.total_price:.4f}"


def rulecheck() -> Iterator[Line]:
    from tests.unit.scheduling.test_rule_checker import Features, scenario, solve_scenario

    features = Features.probe()
    for seed in RULECHECK_SEEDS:
        yield line(f"rulecheck/{seed}", solve_scenario(scenario(seed, features), features))


def cost() -> Iterator[Line]:
    from benchmarks.cost import ZONES, moto_types, provisioner
    from benchmarks.workloads import families, large, random_mixes
    from extender.scheduling.catalog import build_catalog
    from extender.scheduling.pricing import PriceBook

    catalog = build_catalog(moto_types(), offerings=None, zones=ZONES, prices=PriceBook())
    for workload in [*families(), *random_mixes(), large()]:
        plan = solver_module.solve(list(workload.pods), [provisioner(workload.capacity_types)], catalog)
        yield line(f"cost/{workload.name}", plan)


def packing() -> Iterator[Line]:
    from benchmarks.packing import GIB, diverse_pods, fake_types
    from extender.api.provisioner import Provisioner
    from extender.api.resources import Resources

    types = fake_types()
    provisioner = Provisioner(name="default", limits=Resources.of(cpu=10_000_000, memory=10_000_000 * GIB))
    for count in PACKING_SIZES:
        yield line(
            f"packing/{count}",
            solver_module.solve(diverse_pods(count, random.Random(42)), [provisioner], types),
        )
    for seed in DIVERSE_SEEDS:
        pods = diverse_pods(5, random.Random(seed))
        yield line(f"diverse5/{seed}", solver_module.solve(pods, [provisioner], types))


class _Recorder:
    """pytest plugin: every solve() call of the tests, fingerprinted under its test's node id."""

    def __init__(self) -> None:
        self.lines: list[Line] = []
        self.test = ""
        self.calls = 0
        self.failed: list[str] = []

    def pytest_collection_finish(self, session: Any) -> None:
        original = solver_module.solve

        def recording(*args: Any, **kwargs: Any) -> Plan:
            plan = original(*args, **kwargs)
            self.calls += 1
            self.lines.append(line(f"test/{self.test}#{self.calls}", plan))
            return plan

        # Test modules import solve by name: rebind it wherever they did.
        for module in list(sys.modules.values()):
            if getattr(module, "solve", None) is original:
                module.solve = recording  # type: ignore[attr-defined]

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        self.test, self.calls = nodeid, 0

    def pytest_runtest_logreport(self, report: Any) -> None:
        if report.failed:
            self.failed.append(report.nodeid)


def tests() -> Iterator[Line]:
    import pytest

    recorder = _Recorder()
    args = [
        "tests/unit/scheduling",
        "-q",
        # One process: the recorder patches solve() in this one (xdist workers would record nothing).
        "-n",
        "0",
        "-p",
        "no:cacheprovider",
        "--hypothesis-seed=0",
        "--deselect",
        RANDOM_RULECHECK_TEST,
    ]
    pytest.main(args, plugins=[recorder])
    if recorder.failed:
        print(f"fingerprint: {len(recorder.failed)} test(s) failed: {recorder.failed[:5]}", file=sys.stderr)
    if not recorder.lines:
        raise SystemExit("fingerprint: the tests recorded no solve() call")
    yield from recorder.lines


GENERATORS: dict[str, Callable[[], Iterator[Line]]] = {
    "rulecheck": rulecheck,
    "cost": cost,
    "packing": packing,
    "test": tests,
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="fingerprint every solver scenario's plan")
    parser.add_argument("--out", type=Path, required=True, help="file to write, one line per scenario")
    parser.add_argument("--only", nargs="+", choices=SECTIONS, default=list(SECTIONS), help="sections to run")
    args = parser.parse_args(argv)
    lines: list[Line] = []
    for section in args.only:
        found = list(GENERATORS[section]())
        print(f"{section}: {len(found)} scenario(s)", file=sys.stderr)
        lines += found
    args.out.write_text("".join(f"{name} {value}\n" for name, value in lines))
    print(f"wrote {len(lines)} fingerprint(s) to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
