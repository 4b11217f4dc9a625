"""Packing speed on Karpenter's scheduling-benchmark workload; prints pods/sec, nodes, pods per node.

400 synthetic types fake-it-i: (i+1) vCPU, 2(i+1) GiB, 10(i+1) pods, price 0.1 x CPU + 0.1 x GiB, spot in
zones 1-2 and on-demand in 1-3. "Diverse" pods as Karpenter's makeDiversePods: five equal runs, each
with its own label family — generic (my-label=<a..g>); zonal and hostname spread, maxSkew 1 (labels
my-label=<random>, selector my-label=<another random>); zonal self-affinity (my-affininity=<random>,
selecting its own label); hostname anti-affinity (app=nginx, selecting app=nginx: only these pods
carry it) — and the remainder generic. cpu in {100,250,500,1000,1500}m, memory in
{100,256,512,1024,2048,4096}Mi, seed 42. Run: python -m benchmarks.packing
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


def main() -> None:
    types = fake_types()
    provisioner = Provisioner(name="default", limits=Resources.of(cpu=10_000_000, memory=10_000_000 * GIB))
    header = f"{'pods':>7} {'seconds':>9} {'pods/sec':>10} {'nodes':>7} {'pods/node':>10} {'unsched':>8}"
    print(header + f" {'$/h':>10} {'bound $/h':>10} {'gap':>7}")
    for count in (1, 100, 1_000, 5_000, 20_000):
        pods = diverse_pods(count, random.Random(42))
        started = time.perf_counter()
        plan = solve(pods, [provisioner], types)
        elapsed = time.perf_counter() - started
        placed = sum(len(n.pods) for n in plan.nodes)
        gap = f"{plan.gap * 100:.1f}%" if plan.gap is not None else "-"
        print(
            f"{count:>7} {elapsed:>9.3f} {count / elapsed:>10.0f} {len(plan.nodes):>7} "
            f"{placed / max(len(plan.nodes), 1):>10.1f} {len(plan.unschedulable):>8}"
            f" {plan.total_price:>10.2f} {plan.lower_bound:>10.2f} {gap:>7}"
        )


if __name__ == "__main__":
    main()
