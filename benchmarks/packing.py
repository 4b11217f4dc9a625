"""Packing speed on Karpenter's scheduling-benchmark workload; prints pods/sec, nodes, pods per node.

400 synthetic types fake-it-i: (i+1) vCPU, 2(i+1) GiB, 10(i+1) pods, price 0.1 x CPU + 0.1 x GiB, spot in
zones 1-2 and on-demand in 1-3. "Diverse" pods split five ways: generic, zonal spread, hostname spread,
zonal self-affinity, hostname anti-affinity (all labelled app=nginx); cpu in {100,250,500,1000,1500}m,
memory in {100,256,512,1024,2048,4096}Mi, seed 42. Run: python benchmarks/packing.py
"""

from __future__ import annotations

import random
import time

from extender.api import labels as wk
from extender.api.pod import Pod
from extender.api.provisioner import Provisioner
from extender.api.resources import Resources
from extender.scheduling.instancetypes import InstanceType, Offering
from extender.scheduling.solver import solve

GIB = 2**30
ZONES = ("test-zone-1", "test-zone-2", "test-zone-3")


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


def diverse_pods(count: int, rng: random.Random) -> list[Pod]:
    pods = []
    selector = {"matchLabels": {"app": "nginx"}}
    kinds = [
        {},
        {
            "topologySpreadConstraints": [
                {
                    "maxSkew": 1,
                    "topologyKey": wk.ZONE,
                    "labelSelector": selector,
                    "whenUnsatisfiable": "DoNotSchedule",
                }
            ]
        },
        {
            "topologySpreadConstraints": [
                {
                    "maxSkew": 1,
                    "topologyKey": wk.HOSTNAME,
                    "labelSelector": selector,
                    "whenUnsatisfiable": "DoNotSchedule",
                }
            ]
        },
        {
            "affinity": {
                "podAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"topologyKey": wk.ZONE, "labelSelector": selector}
                    ]
                }
            }
        },
        {
            "affinity": {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"topologyKey": wk.HOSTNAME, "labelSelector": selector}
                    ]
                }
            }
        },
    ]
    for i in range(count):
        kind = min(i * 5 // max(count, 1), 4)
        cpu = rng.choice(["100m", "250m", "500m", "1000m", "1500m"])
        mem = rng.choice(["100Mi", "256Mi", "512Mi", "1024Mi", "2048Mi", "4096Mi"])
        labels = {"app": "nginx", "my-label": rng.choice("abcdefg")}
        pods.append(
            Pod.from_manifest(
                {
                    "metadata": {"name": f"pod-{i}", "namespace": "default", "labels": labels},
                    "spec": {
                        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": mem}}}],
                        **kinds[kind],
                    },
                }
            )
        )
    return pods


def main() -> None:
    types = fake_types()
    provisioner = Provisioner(name="default", limits=Resources.of(cpu=10_000_000, memory=10_000_000 * GIB))
    print(f"{'pods':>7} {'seconds':>9} {'pods/sec':>10} {'nodes':>7} {'pods/node':>10} {'unsched':>8}")
    for count in (1, 100, 1_000, 5_000, 20_000):
        pods = diverse_pods(count, random.Random(42))
        started = time.perf_counter()
        plan = solve(pods, [provisioner], types)
        elapsed = time.perf_counter() - started
        placed = sum(len(n.pods) for n in plan.nodes)
        print(
            f"{count:>7} {elapsed:>9.3f} {count / elapsed:>10.0f} {len(plan.nodes):>7} "
            f"{placed / max(len(plan.nodes), 1):>10.1f} {len(plan.unschedulable):>8}"
        )


if __name__ == "__main__":
    main()
