"""Small-batch latency of `solve()` (no lower bound, as the provisioning pipeline calls it) on
Karpenter's scheduling-benchmark inputs (benchmarks/packing.py: its 400 fake types, its diverse pods),
median and p99 for 1, 5 and 100 pods, for this tree and another side by side in one sitting.

Two ways of asking:
- "same": one batch solved again and again, as Karpenter's BenchmarkScheduling does;
- "new": a different batch each solve (the diverse pods drawn with seed i), as batches come in a
  live cluster; what is derived from the catalog carries over, a batch's own pods do not.
"first" is the first solve of the process (imports done, nothing derived from the catalog yet);
"cpu" the median of the solving thread's CPU time, which other processes' load disturbs less;
"gc2" the full (generation 2) garbage collections during the way's solves: each pauses one solve
for tens of milliseconds (it walks every object the process holds, the catalog's included), so a
tail figure is mostly whether one fell in the window.
p99 is the nearest-rank 99th percentile, from at least 100 solves: 100 pods run 100 solves each
way (was 40, whose "p99" was their maximum, so one full collection more or less in the window
decided it). With fewer solves the column shows the maximum, marked `*`.
5,000 pods: three solves each way (the issue's 9x-Karpenter figure is at this size).
Karpenter's figures on the same inputs (issue 26): 1 pod 0.6 ms, 5 pods 2.8 ms.

    python -m benchmarks.latency [--base /work/wt-base] [--runs 200] [--no-limits] [--sizes 1 5]
        [--processes 10]

--no-limits: the Provisioner states no limits (Karpenter's benchmark sets some), so the round also
runs the configuration LP's rounded starts (passes.FromLP), which limited Provisioners never get.

Each tree runs in its own interpreter (`PYTHONPATH=<tree>`); with --base, the trees alternate per
size so machine load hits both alike. Prints the load average beside the figures; asserts nothing.
--processes N: N interpreters per size and tree, each pair in turn led by the other tree, and the
medians of each column: while other sessions run, one interpreter's figures at 1 and 5 pods move by
30-50 % from the next one's, far more than the difference between two trees.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import statistics
import time
from pathlib import Path

SIZES = (1, 5, 100, 5000)
KARPENTER_MS = {1: 0.6, 5: 2.8}
ROOT = Path(__file__).resolve().parents[1]


#: Fewer solves than this give no 99th percentile (the nearest rank would be the maximum).
P99_SAMPLES = 100


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def _full_collections() -> int:
    return gc.get_stats()[2]["collections"]


def measure(size: int, runs: int, limited: bool = True) -> dict[str, float]:
    """Milliseconds: the first solve, then median and p99 of `runs` solves per way of asking."""
    from benchmarks.packing import GIB, diverse_pods, fake_types
    from extender.api.provisioner import Provisioner
    from extender.api.resources import Resources
    from extender.scheduling.solver import solve

    types = fake_types()
    limits = Resources.of(cpu=10_000_000, memory=10_000_000 * GIB) if limited else Resources()
    provisioner = Provisioner(name="default", limits=limits)
    same = diverse_pods(size, random.Random(42))
    batches = [diverse_pods(size, random.Random(seed)) for seed in range(runs)]
    result: dict[str, float] = {}
    started = time.perf_counter()
    plan = solve(same, [provisioner], types, with_bound=False)
    result["first"] = (time.perf_counter() - started) * 1e3
    result["nodes"], result["price"] = len(plan.nodes), plan.total_price
    for way, pods_of in (("same", lambda i: same), ("new", lambda i: batches[i])):
        times, cpu = [], []
        full = _full_collections()
        for i in range(runs):
            pods = pods_of(i)
            started, started_cpu = time.perf_counter(), time.thread_time()
            solve(pods, [provisioner], types, with_bound=False)
            times.append((time.perf_counter() - started) * 1e3)
            cpu.append((time.thread_time() - started_cpu) * 1e3)
        result[f"{way} gc2"] = _full_collections() - full
        result[f"{way} p50"], result[f"{way} p99"] = statistics.median(times), _percentile(times, 0.99)
        result[f"{way} cpu"] = statistics.median(cpu)
    return result


def run_tree(tree: Path, size: int, runs: int, limited: bool) -> dict[str, float]:
    """`measure` in a fresh interpreter importing `tree`'s karpy (this file's workload code)."""
    from benchmarks.trees import run_in_tree  # here: the other tree's `benchmarks` may lack it

    result: dict[str, float] = run_in_tree(tree, __file__, "measure", size, runs, limited)
    return result


def _cell(column: str, value: float, runs: int) -> str:
    if column.endswith("gc2"):
        return f"{int(value):>9}"
    if column.endswith("p99") and runs < P99_SAMPLES:
        return f"{value:>8.2f}*"
    return f"{value:>9.2f}"


def _row(size: int, name: str, runs: int, cols: tuple[str, ...], r: dict[str, float], karpenter: str) -> str:
    return (
        f"{size:>5} {name:>5} {runs:>5} "
        + " ".join(_cell(c, r[c], runs) for c in cols)
        + f" {int(r['nodes']):>6} {r['price']:>8.2f} {karpenter}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", type=Path, help="another tree (e.g. a worktree of main) to compare with")
    parser.add_argument(
        "--runs", type=int, default=200, help="solves per size and way (100 pods: half, at least 100)"
    )
    parser.add_argument("--no-limits", action="store_true", help="a Provisioner without limits")
    parser.add_argument(
        "--processes",
        type=int,
        default=1,
        help="interpreters per size and tree, taking turns first; >1 adds a row of medians (~this, ~base)",
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="batch sizes to measure")
    args = parser.parse_args()
    trees = {"this": ROOT, **({"base": args.base.resolve()} if args.base else {})}
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    ways = ("same", "new")
    cols = ("first", *(f"{w} {c}" for w in ways for c in ("p50", "p99", "cpu", "gc2")))
    header = f"{'pods':>5} {'tree':>5} {'runs':>5} " + " ".join(f"{c:>9}" for c in cols)
    print(header + f" {'nodes':>6} {'$/h':>8} karpenter")
    for size in args.sizes:
        runs = args.runs if size < 100 else max(P99_SAMPLES, args.runs // 2) if size < 1000 else 3
        karpenter = f"{KARPENTER_MS[size]:.1f} ms" if size in KARPENTER_MS else "-"
        rows: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
        for process in range(args.processes):
            # Each process in turn goes first, so a slow spell of the machine hits both trees alike.
            names = sorted(trees, reverse=process % 2 == 0)
            for name in names:
                r = run_tree(trees[name], size, runs, not args.no_limits)
                rows[name].append(r)
                print(_row(size, name, runs, cols, r, karpenter))
        if args.processes > 1:
            for name in sorted(trees, reverse=True):
                median = {k: statistics.median(r[k] for r in rows[name]) for k in rows[name][0]}
                print(_row(size, f"~{name}", runs, cols, median, karpenter))
    print("milliseconds per solve(); gc2: full collections in the way's solves")
    print("* the maximum: too few solves for a 99th percentile")
    if args.processes > 1:
        print(f"~: the median of each column over the {args.processes} interpreters of the tree")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
