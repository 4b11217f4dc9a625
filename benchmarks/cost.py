"""Plan cost against the tightest provable lower bound, on a family of workloads and 50 random mixes.

Catalog: moto's DescribeInstanceTypes (every type karpy keeps), priced by karpy's built-in us-east-1
table; types in no table are estimated, and neither karpy's plan nor the bound nor the baselines use
them while a priced type fits. No spot price history here, so spot offerings carry the on-demand
price (what karpy does until spot history answers).

Per workload: karpy's plan $/h; `LP` = the fractional LP bound on price over cpu, memory, pods
(and GPUs) over the priced types the pods may use (benchmarks/bounds.py); `own` = the bound the
solver proves (Plan.lower_bound, whole pods per node); ratio = plan / max(LP, own); solve time
(wall, with the bound). Beside it: Karpenter 0.5's FFD (its family filter, largest-first, cheapest
of 20 options) and Cluster-Autoscaler node groups of m5.large / m5.xlarge ("-" where the group
cannot run every pod). Prints the worst ratio, not only the mean, and the load average, since
timings on a shared machine move with it. Asserts nothing.

`--exact` adds `CG`: the configuration LP's optimum over whole-pod node patterns, by column
generation with HiGHS (benchmarks/configlp.py; valid at every round by Farley's argument), so the
ratio is plan / max(LP, own, CG); and `MIP`: the integer plan over the generated patterns, a real
plan that brackets the optimum from above (plan / MIP near 1 means the plan is near-optimal and
any gap is the bound's). Slow: seconds to a minute per workload.

Run: .venv/bin/python -m benchmarks.cost [--quick] [--exact]  (--quick: families only)
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Sequence
from typing import Any

import boto3
from moto import mock_aws

from benchmarks.baselines import Outcome, karpenter_ffd, node_group
from benchmarks.bounds import lp_bound
from benchmarks.workloads import Workload, families, large, random_mixes
from extender.api import labels as wk
from extender.api.provisioner import Provisioner, Requirement
from extender.scheduling.catalog import build_catalog
from extender.scheduling.instancetypes import InstanceType
from extender.scheduling.pricing import PriceBook
from extender.scheduling.solver import solve

ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
TARGET_RATIO = 1.03
TARGET_SECONDS = 2.0


def moto_types() -> list[dict[str, Any]]:
    with mock_aws():
        ec2 = boto3.client("ec2", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
        items: list[dict[str, Any]] = []
        for page in ec2.get_paginator("describe_instance_types").paginate():
            items += page["InstanceTypes"]
    return items


def provisioner(capacity_types: Sequence[str]) -> Provisioner:
    return Provisioner(
        name="default", requirements=(Requirement(wk.CAPACITY_TYPE, "In", tuple(capacity_types)),)
    )


def _group_price(outcome: Outcome) -> str:
    return f"{outcome.price:.3f}" if not outcome.unschedulable else "-"


def measure(
    workload: Workload, catalog: Sequence[InstanceType], by_name: dict[str, InstanceType], exact: bool = False
) -> dict[str, Any]:
    started = time.perf_counter()
    plan = solve(list(workload.pods), [provisioner(workload.capacity_types)], catalog)
    elapsed = time.perf_counter() - started
    lp = lp_bound(workload.pods, catalog, workload.capacity_types)
    configuration = None
    if exact:
        from benchmarks.configlp import configuration_lp  # scipy (dev extra): only for --exact

        configuration = configuration_lp(workload.pods, catalog, workload.capacity_types)
    cg = configuration.bound if configuration else 0.0
    bound = max(lp, plan.lower_bound, cg)
    return {
        "cg": cg,
        "mip": configuration.integer if configuration else None,
        "name": workload.name,
        "pods": len(workload.pods),
        "nodes": len(plan.nodes),
        "plan": plan.total_price,
        "lp": lp,
        "own": plan.lower_bound,
        "ratio": plan.total_price / bound if bound else float("nan"),
        "seconds": elapsed,
        "unscheduled": len(plan.unschedulable),
        "karpenter": karpenter_ffd(workload.pods, catalog, workload.capacity_types),
        "m5.large": node_group(workload.pods, by_name["m5.large"]),
        "m5.xlarge": node_group(workload.pods, by_name["m5.xlarge"]),
    }


HEADER = (
    f"{'workload':<18} {'pods':>5} {'nodes':>5} {'karpy $/h':>9} {'LP $/h':>8} {'own $/h':>8}"
    f" {'ratio':>6} {'time s':>6} {'Karp0.5':>8} {'ratio':>6} {'CA m5.l':>8} {'CA m5.xl':>8}"
)


def row(r: dict[str, Any]) -> str:
    bound = max(r["lp"], r["own"], r["cg"])
    karpenter = r["karpenter"]
    return (
        f"{r['name']:<18} {r['pods']:>5} {r['nodes']:>5} {r['plan']:>9.3f} {r['lp']:>8.3f} {r['own']:>8.3f}"
        f" {r['ratio']:>6.3f} {r['seconds']:>6.2f} {karpenter.price:>8.3f} {karpenter.price / bound:>6.3f}"
        f" {_group_price(r['m5.large']):>8} {_group_price(r['m5.xlarge']):>8}"
        + (f"  ({r['unscheduled']} unscheduled)" if r["unscheduled"] else "")
        + (f"  CG {r['cg']:.3f} MIP {r['mip']:.3f} plan/MIP {r['plan'] / r['mip']:.3f}" if r["mip"] else "")
    )


def summary(label: str, results: Sequence[dict[str, Any]]) -> str:
    ratios = [r["ratio"] for r in results]
    worst = max(results, key=lambda r: r["ratio"])
    over = sum(1 for x in ratios if x > TARGET_RATIO)
    karpenter = [r["karpenter"].price / max(r["lp"], r["own"], r["cg"]) for r in results]
    return (
        f"{label}: worst {worst['ratio']:.3f} ({worst['name']}), mean {statistics.mean(ratios):.3f},"
        f" {over}/{len(ratios)} above {TARGET_RATIO}; Karpenter-0.5 FFD worst {max(karpenter):.3f},"
        f" mean {statistics.mean(karpenter):.3f}"
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="karpy plan cost against lower bounds and baselines")
    parser.add_argument("--quick", action="store_true", help="families only, no random mixes")
    parser.add_argument("--exact", action="store_true", help="add the configuration LP bound (HiGHS)")
    args = parser.parse_args(argv)
    catalog = build_catalog(moto_types(), offerings=None, zones=ZONES, prices=PriceBook())
    by_name = {t.name: t for t in catalog}
    estimated = sum(1 for t in catalog if t.offerings[0].price_source == "estimate")
    print(f"catalog: {len(catalog)} types from moto, {estimated} of them in no price table (estimated)")
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cpus)")
    print(HEADER)
    fam = [measure(w, catalog, by_name, args.exact) for w in families()]
    for r in fam:
        print(row(r))
    print(summary("families", fam))
    if not args.quick:
        mixes = [measure(w, catalog, by_name, args.exact) for w in random_mixes()]
        for r in sorted(mixes, key=lambda r: -r["ratio"])[:10]:
            print(row(r))
        print(summary("50 random mixes (10 worst shown)", mixes))
    big = large()
    started = time.perf_counter()
    plan = solve(list(big.pods), [provisioner(big.capacity_types)], catalog, with_bound=False)
    elapsed = time.perf_counter() - started
    print(
        f"{big.name}: {len(plan.nodes)} nodes ${plan.total_price:.3f}/h planned in {elapsed:.2f}s without"
        f" the bound (target <= {TARGET_SECONDS}s); load average {os.getloadavg()[0]:.2f}"
    )


if __name__ == "__main__":
    main()
