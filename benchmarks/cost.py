"""Plan cost on realistic mixes with the full moto catalog and the shared on-demand price file.

Prints plan $/h, LP lower bound, gap, and a Cluster-Autoscaler-style single node group (all m5.large,
on-demand, pods packed FFD by cpu then memory) for comparison. Run: python benchmarks/cost.py
(python -m benchmarks.cost; needs moto for DescribeInstanceTypes;
prices from ../shared/data/ec2-on-demand-prices.json).
"""

from __future__ import annotations

import random
from pathlib import Path

import boto3
from moto import mock_aws

from extender.api import labels as wk
from extender.api.pod import Pod
from extender.api.provisioner import Provisioner, Requirement
from extender.scheduling.catalog import build_catalog
from extender.scheduling.pricing import PriceBook
from extender.scheduling.solver import solve

PRICES = Path(__file__).resolve().parents[2] / "shared" / "data" / "ec2-on-demand-prices.json"
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")


def moto_types() -> list[dict]:
    with mock_aws():
        ec2 = boto3.client("ec2", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
        items: list[dict] = []
        for page in ec2.get_paginator("describe_instance_types").paginate():
            items += page["InstanceTypes"]
    return items


def pods(name: str, count: int, cpu: str, memory: str, rng: random.Random, **spec) -> list[Pod]:
    extra = spec.pop("limits", {})
    return [
        Pod.from_manifest(
            {
                "metadata": {"name": f"{name}-{i}", "labels": {"app": name}},
                "spec": {
                    "containers": [
                        {
                            "name": "c",
                            "resources": {"requests": {"cpu": cpu, "memory": memory}, "limits": extra},
                        }
                    ],
                    **spec,
                },
            }
        )
        for i in range(count)
    ]


def mixes(rng: random.Random) -> dict[str, list[Pod]]:
    return {
        "web": pods("web", 300, "500m", "1Gi", rng) + pods("api", 120, "1", "2Gi", rng),
        "batch": pods("batch", 400, "2", "2Gi", rng),
        "memory-heavy": pods("cache", 150, "500m", "8Gi", rng) + pods("db", 20, "2", "32Gi", rng),
        "gpu": pods("train", 16, "4", "16Gi", rng, limits={"nvidia.com/gpu": 1})
        + pods("web", 100, "500m", "1Gi", rng),
        "arm-friendly": pods("svc", 300, "1", "2Gi", rng, nodeSelector={wk.ARCH: "arm64"}),
        "mixed": pods("web", 200, "250m", "512Mi", rng)
        + pods("batch", 100, "3", "6Gi", rng)
        + pods("cache", 50, "1", "12Gi", rng),
    }


def ca_node_group(pod_list: list[Pod], catalog: dict) -> float:
    """Cluster Autoscaler with one m5.large on-demand group: FFD into identical nodes."""
    node = catalog["m5.large"]
    price = min(o.price for o in node.offerings if o.capacity_type == "on-demand")
    free: list[list[float]] = []
    for pod in sorted(pod_list, key=lambda p: (-p.requests.cpu, -p.requests.memory)):
        if pod.requests.get("nvidia.com/gpu"):
            continue  # an m5.large group cannot run it at all
        need = (pod.requests.cpu, pod.requests.memory, 1)
        for slot in free:
            if all(n <= s + 1e-9 for n, s in zip(need, slot, strict=True)):
                slot[:] = [s - n for s, n in zip(slot, need, strict=True)]
                break
        else:
            free.append(
                [node.allocatable.cpu - need[0], node.allocatable.memory - need[1], node.max_pods - 1]
            )
    return len(free) * price


def main() -> None:
    prices = PriceBook.from_file(PRICES)
    catalog = build_catalog(moto_types(), offerings=None, zones=ZONES, prices=prices)
    by_name = {t.name: t for t in catalog}
    on_demand = Provisioner(
        name="default", requirements=(Requirement(wk.CAPACITY_TYPE, "In", ("on-demand",)),)
    )
    print(f"catalog: {len(catalog)} types; on-demand only (spot prices in the file are absent)")
    print(
        f"{'mix':<14} {'pods':>5} {'nodes':>6} {'plan $/h':>9} {'bound $/h':>10} {'gap':>7}"
        f" {'CA m5.large $/h':>16} {'unsched':>8}"
    )
    for name, pod_list in mixes(random.Random(7)).items():
        plan = solve(pod_list, [on_demand], catalog)
        gap = f"{plan.gap * 100:.1f}%" if plan.gap is not None else "-"
        print(
            f"{name:<14} {len(pod_list):>5} {len(plan.nodes):>6} {plan.total_price:>9.3f}"
            f" {plan.lower_bound:>10.3f} {gap:>7} {ca_node_group(pod_list, by_name):>16.3f}"
            f" {len(plan.unschedulable):>8}"
        )


if __name__ == "__main__":
    main()
