"""The balanced greedy pass (packer.Packer._balanced, chosen by solver when cheaper): cpu-heavy and
memory-heavy pods share nodes whose proportions suit them together, and every kube-scheduler rule and
Provisioner limit still holds for what it places."""

from __future__ import annotations

from typing import Any

from extender.api.pod import Pod
from extender.scheduling.solver import solve
from tests.unit.scheduling import rulecheck
from tests.unit.scheduling.builders import catalog, make_provisioner
from tests.unit.scheduling.test_improve import raw_pod


def heavy_mix() -> list[dict]:
    """60 memory-heavy pods (2 CPU, 32Gi) and 80 cpu-heavy ones (6 CPU, 3Gi): first-fit puts each
    shape on nodes sized for it alone; together they fill general-purpose nodes."""
    return [raw_pod(f"mem-{i}", "2", "32Gi", {"app": "mem"}) for i in range(60)] + [
        raw_pod(f"cpu-{i}", "6", "3Gi", {"app": "cpu"}) for i in range(80)
    ]


def test_cpu_heavy_and_memory_heavy_pods_share_nodes_within_3_percent_of_the_bound() -> None:
    plan = solve([Pod.from_manifest(p) for p in heavy_mix()], [make_provisioner()], list(catalog()))
    assert not plan.unschedulable
    assert plan.total_price <= 1.03 * plan.lower_bound
    assert any({p.labels["app"] for p in node.pods} == {"mem", "cpu"} for node in plan.nodes)


def ruled(name: str, cpu: str, memory: str, app: str, **spec: Any) -> dict:
    return raw_pod(name, cpu, memory, {"app": app}, **spec)


def test_balanced_pass_keeps_hostname_rules_host_ports_zone_spread_and_limits() -> None:
    anti = {
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": {"app": "solo"}},
                    }
                ]
            }
        }
    }

    def spread(key: str, app: str) -> dict:
        constraint = {
            "maxSkew": 1,
            "topologyKey": key,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": app}},
        }
        return {"topologySpreadConstraints": [constraint]}

    raw = heavy_mix()
    raw += [ruled(f"solo-{i}", "2", "32Gi", "solo", **anti) for i in range(5)]
    raw += [
        ruled(f"host-{i}", "6", "3Gi", "host", **spread("kubernetes.io/hostname", "host")) for i in range(9)
    ]
    raw += [
        ruled(f"zone-{i}", "2", "32Gi", "zone", **spread("topology.kubernetes.io/zone", "zone"))
        for i in range(7)
    ]
    for i in range(4):
        pod = ruled(f"port-{i}", "6", "3Gi", "port")
        pod["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
        raw.append(pod)
    for provisioner in (make_provisioner(), make_provisioner(limits={"resources": {"cpu": "400"}})):
        plan = solve([Pod.from_manifest(p) for p in raw], [provisioner], list(catalog()))
        args = (raw, [], plan, [provisioner], catalog())
        assert rulecheck.violations(*args) + rulecheck.unjustified_unschedulable(*args) == []
        assert any({p.labels["app"] for p in node.pods} >= {"mem", "cpu"} for node in plan.nodes)
