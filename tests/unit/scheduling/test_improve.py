"""Local search (improve.py): repacking the worst nodes never makes a plan dearer, places the same
pods, and breaks no kube-scheduler rule; on mixes the greedy packs poorly it finds cheaper plans."""

from __future__ import annotations

import random
from typing import Any

import pytest

from extender.api.pod import Pod
from extender.scheduling import improve
from extender.scheduling.solver import solve
from tests.unit.scheduling import rulecheck
from tests.unit.scheduling.builders import catalog, make_provisioner

CPUS = ("250m", "500m", "1", "2", "3")
MEMORIES = ("512Mi", "1Gi", "2Gi", "4Gi", "8Gi")


def raw_pod(name: str, cpu: str, memory: str, labels: dict[str, str] | None = None, **spec: Any) -> dict:
    requests = {"cpu": cpu, "memory": memory}
    return {
        "metadata": {"name": name, "namespace": "default", "labels": labels or {}},
        "spec": {"containers": [{"name": "c", "resources": {"requests": requests}}], **spec},
    }


def mix(seed: int) -> list[dict]:
    """2-4 shapes of plain pods, 3-40 of each."""
    rng = random.Random(seed)
    result = []
    for shape in range(rng.randint(2, 4)):
        cpu, memory = rng.choice(CPUS), rng.choice(MEMORIES)
        result += [raw_pod(f"s{shape}-{i}", cpu, memory) for i in range(rng.randint(3, 40))]
    return result


def plans(raw: list[dict]) -> tuple[Any, Any]:
    pods = [Pod.from_manifest(p) for p in raw]
    greedy = solve(pods, [make_provisioner()], list(catalog()), search_budget=0, with_bound=False)
    searched = solve(pods, [make_provisioner()], list(catalog()), with_bound=False)
    return greedy, searched


def placed(plan: Any) -> set[str]:
    return {pod.key for node in plan.nodes for pod in node.pods}


@pytest.mark.parametrize("seed", range(0, 60, 4))
def test_local_search_never_makes_a_plan_dearer_and_places_the_same_pods(seed: int) -> None:
    greedy, searched = plans(mix(seed))
    assert searched.total_price <= greedy.total_price + 1e-9
    if len(searched.nodes) > len(greedy.nodes):
        # More nodes only where that saves more than SPLIT_SAVING of the cost.
        assert greedy.total_price - searched.total_price > improve.SPLIT_SAVING * greedy.total_price
    assert placed(searched) == placed(greedy)
    assert {u.pod.key for u in searched.unschedulable} == {u.pod.key for u in greedy.unschedulable}


def test_local_search_repacks_poorly_filled_nodes_cheaper() -> None:
    greedy, searched = plans(mix(19))
    assert searched.total_price < 0.98 * greedy.total_price
    assert len(placed(searched)) == sum(len(n.pods) for n in searched.nodes)


def test_local_search_keeps_hostname_rules_and_host_ports() -> None:
    spread = {
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "spread"}},
            }
        ]
    }
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
    ports = [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 8080}]}]
    raw = mix(19) + [raw_pod(f"spread-{i}", "500m", "1Gi", {"app": "spread"}, **spread) for i in range(6)]
    raw += [raw_pod(f"solo-{i}", "1", "2Gi", {"app": "solo"}, **anti) for i in range(4)]
    for i in range(3):
        pod = raw_pod(f"web-{i}", "250m", "512Mi")
        pod["spec"]["containers"][0]["ports"] = ports[0]["ports"]
        raw.append(pod)
    greedy, searched = plans(raw)
    assert searched.total_price <= greedy.total_price + 1e-9
    assert placed(searched) == {Pod.from_manifest(p).key for p in raw}
    args = (raw, [], searched, [make_provisioner()], catalog())
    assert rulecheck.violations(*args) + rulecheck.unjustified_unschedulable(*args) == []


def test_a_zero_budget_is_the_greedy_plan() -> None:
    pods = [Pod.from_manifest(p) for p in mix(9)]
    again = solve(pods, [make_provisioner()], list(catalog()), search_budget=0, with_bound=False)
    greedy, _ = plans(mix(9))
    assert [n.options[0].name for n in again.nodes] == [n.options[0].name for n in greedy.nodes]


def test_a_split_that_saves_a_real_share_of_the_cost_is_taken() -> None:
    """Five 1-CPU pods: three small nodes cost 12 % less than one 8-vCPU node, so the split is taken.

    The rule was "each added node must save more than the cheapest added node costs", which kept
    the dearer single node here (and, in benchmarks/cost.py's random-36, one $0.153 node where two
    nodes cost $0.130). A node's unlisted costs (DaemonSets, addresses, a launch that can fail) are
    why a split must save by a real margin, but a margin relative to the plan's cost: a cheap node's
    list price is no measure of what a split saves."""
    greedy, searched = plans([raw_pod(f"p{i}", "1", "512Mi") for i in range(5)])
    assert len(greedy.nodes) == 1
    assert len(searched.nodes) > 1
    assert searched.total_price < (1 - improve.SPLIT_SAVING) * greedy.total_price


def test_a_split_must_save_more_than_the_margin() -> None:
    before = 1.0
    assert not improve.pays_for_its_nodes(1, 0.5 * improve.SPLIT_SAVING * before, before)
    assert improve.pays_for_its_nodes(1, 2 * improve.SPLIT_SAVING * before, before)
    assert improve.pays_for_its_nodes(0, 1e-6, before)
