"""Packing speed on Karpenter's scheduling-benchmark workload; prints pods/sec, nodes, pods per node.

400 synthetic types fake-it-i: (i+1) vCPU, 2(i+1) GiB, 10(i+1) pods, price 0.1 x CPU + 0.1 x GiB, spot in
zones 1-2 and on-demand in 1-3. "Diverse" pods as Karpenter's makeDiversePods: five equal runs, each
with its own label family — generic (my-label=<a..g>); zonal and hostname spread, maxSkew 1 (labels
my-label=<random>, selector my-label=<another random>); zonal self-affinity (my-affininity=<random>,
selecting its own label); hostname anti-affinity (app=nginx, selecting app=nginx: only these pods
carry it) — and the remainder generic. cpu in {100,250,500,1000,1500}m, memory in
{100,256,512,1024,2048,4096}Mi, seed 42. One solve per size, in one process (the first size pays
for what is derived from the catalog).

    python -m benchmarks.packing [--base /work/wt-base [--rounds 3]] [--sizes 1 100]

--base: this tree and another alternately, `--rounds` times, each round a fresh interpreter per tree
(`PYTHONPATH=<tree>`, this file's workload code), then the median seconds per size side by side.
"cpu s": the solving thread's CPU time, which other processes' load disturbs less. Prints the load
average beside the figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from pathlib import Path

from extender.api import labels as wk
from extender.api.pod import Pod
from extender.api.provisioner import Provisioner
from extender.api.resources import Resources
from extender.scheduling.instancetypes import InstanceType, Offering
from extender.scheduling.solver import solve

GIB = 2**30
ROOT = Path(__file__).resolve().parents[1]
ZONES = ("test-zone-1", "test-zone-2", "test-zone-3")
LABEL_VALUES = "abcdefg"
CPUS = ("100m", "250m", "500m", "1000m", "1500m")
MEMORIES = ("100Mi", "256Mi", "512Mi", "1024Mi", "2048Mi", "4096Mi")


def fake_types(count: int = 400) -> list[InstanceType]:
    types = []
    for i in range(count):
        cpu, mem = i + 1, 2 * (i + 1)
        price = 0.1 * cpu + 0.1 * mem
        offerings = [Offering(z, "spot", price, True) for z in ZONES[:2]]
        offerings += [Offering(z, "on-demand", price, True) for z in ZONES]
        types.append(
            InstanceType.build(
                name=f"fake-it-{i}",
                cpu=cpu,
                memory=mem * GIB / 0.925,
                arch="amd64",
                max_pods=10 * (i + 1),
                offerings=offerings,
            )
        )
    return types


def _spread(key: str, rng: random.Random) -> dict:
    selector = {"matchLabels": {"my-label": rng.choice(LABEL_VALUES)}}
    constraint = {"maxSkew": 1, "topologyKey": key, "labelSelector": selector}
    return {"topologySpreadConstraints": [{**constraint, "whenUnsatisfiable": "DoNotSchedule"}]}


def _affinity(kind: str, key: str, labels: dict[str, str]) -> dict:
    term = {"topologyKey": key, "labelSelector": {"matchLabels": labels}}
    return {"affinity": {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}


def _family(kind: int, rng: random.Random) -> tuple[dict[str, str], dict]:
    """Labels and constraints of one pod of run `kind` (0 generic, then the four constrained runs)."""
    if kind in (1, 2):
        return {"my-label": rng.choice(LABEL_VALUES)}, _spread(wk.ZONE if kind == 1 else wk.HOSTNAME, rng)
    if kind == 3:
        labels = {"my-affininity": rng.choice(LABEL_VALUES)}
        return labels, _affinity("podAffinity", wk.ZONE, labels)
    if kind == 4:
        labels = {"app": "nginx"}
        return labels, _affinity("podAntiAffinity", wk.HOSTNAME, labels)
    return {"my-label": rng.choice(LABEL_VALUES)}, {}


def diverse_pods(count: int, rng: random.Random) -> list[Pod]:
    per_kind = count // 5
    pods = []
    for i in range(count):
        kind = i // per_kind if per_kind and i < 5 * per_kind else 0
        labels, constraints = _family(kind, rng)
        requests = {"cpu": rng.choice(CPUS), "memory": rng.choice(MEMORIES)}
        manifest = {
            "metadata": {"name": f"pod-{i}", "namespace": "default", "labels": labels},
            "spec": {"containers": [{"name": "c", "resources": {"requests": requests}}], **constraints},
        }
        pods.append(Pod.from_manifest(manifest))
    return pods


SIZES = (1, 100, 1_000, 5_000, 20_000)


def measure(sizes: list[int]) -> list[dict[str, float]]:
    """One solve (with the lower bound) per size, in order, in this process: one row of figures each."""
    types = fake_types()
    provisioner = Provisioner(name="default", limits=Resources.of(cpu=10_000_000, memory=10_000_000 * GIB))
    rows = []
    for count in sizes:
        pods = diverse_pods(count, random.Random(42))
        started, started_cpu = time.perf_counter(), time.thread_time()
        plan = solve(pods, [provisioner], types)
        elapsed = time.perf_counter() - started
        rows.append(
            {
                "pods": count,
                "seconds": elapsed,
                "cpu": time.thread_time() - started_cpu,
                "nodes": len(plan.nodes),
                "placed": sum(len(n.pods) for n in plan.nodes),
                "unsched": len(plan.unschedulable),
                "price": plan.total_price,
                "bound": plan.lower_bound,
                "gap": -1.0 if plan.gap is None else plan.gap,
            }
        )
    return rows


def _line(row: dict[str, float], tree: str = "") -> str:
    count, elapsed, nodes = int(row["pods"]), row["seconds"], int(row["nodes"])
    gap = f"{row['gap'] * 100:.1f}%" if row["gap"] >= 0 else "-"
    return (
        f"{count:>7} {tree:>5}{elapsed:>9.3f} {row['cpu']:>9.3f} {count / elapsed:>10.0f} {nodes:>7} "
        f"{row['placed'] / max(nodes, 1):>10.1f} {int(row['unsched']):>8}"
        f" {row['price']:>10.2f} {row['bound']:>10.2f} {gap:>7}"
    )


def compare(base: Path, rounds: int, sizes: list[int]) -> None:
    """This tree and `base` alternately, each round in a fresh interpreter per tree; then the medians."""
    from benchmarks.trees import run_in_tree  # here: the other tree's `benchmarks` may lack it

    trees = {"this": ROOT, "base": base.resolve()}
    seconds: dict[tuple[str, str, int], list[float]] = {}
    for round_ in range(rounds):
        order = ("this", "base") if round_ % 2 == 0 else ("base", "this")
        for name in order:
            for row in run_in_tree(trees[name], __file__, "measure", sizes):
                print(_line(row, name), f"round {round_ + 1}", flush=True)
                for column in ("seconds", "cpu"):
                    seconds.setdefault((column, name, int(row["pods"])), []).append(row[column])
    print(f"medians over {rounds} round(s), seconds:")
    for count in sizes:
        cells = []
        for column in ("seconds", "cpu"):
            this, then = (statistics.median(seconds[column, name, count]) for name in ("this", "base"))
            cells.append(f"{column:>7} this {this:>8.3f} base {then:>8.3f} this/base {this / then:>5.2f}")
        print(f"{count:>7}  " + "   ".join(cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", type=Path, help="another tree (e.g. a worktree of main) to compare with")
    parser.add_argument("--rounds", type=int, default=3, help="with --base: rounds of both trees, alternated")
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=list(SIZES), help="batch sizes, solved in order"
    )
    args = parser.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    header = (
        f"{'pods':>7} {'tree':>5}{'seconds':>9} {'cpu s':>9} {'pods/sec':>10} {'nodes':>7} {'pods/node':>10}"
    )
    print(header + f" {'unsched':>8} {'$/h':>10} {'bound $/h':>10} {'gap':>7}")
    if args.base:
        compare(args.base, args.rounds, args.sizes)
    else:
        for row in measure(args.sizes):
            print(_line(row), flush=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
