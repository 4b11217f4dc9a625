"""Last binds (solver.py `_last_binds`, lastbind.py): a pod whose domain was chosen where limits
forbid a new node is tried once more on the plan's and the cluster's nodes, binding after the rest.

The reference is kube-scheduler binding the pod after the others: PodTopologySpread and
InterPodAffinity filters over the nodes that exist (pkg/scheduler/framework/plugins/
podtopologyspread/filtering.go, interpodaffinity/filtering.go); issue 24's rule checker
(`rulecheck.stricter_than_scheduler`) found these pods over random clusters."""

from __future__ import annotations

import dataclasses
from functools import partial

from extender.api import labels as wk
from extender.api.resources import Resources
from extender.scheduling.solver import solve
from tests import builders
from tests.model_builders import existing_node
from tests.unit.scheduling.builders import catalog, make_provisioner

WEB = {"app": "web"}


#: An empty on-demand amd64 m5.xlarge (3.8 CPU, 14 GB, 58 pods); keywords as
#: tests.model_builders.existing_node.
ready_node = partial(
    existing_node,
    labels={wk.ARCH: "amd64", wk.CAPACITY_TYPE: "on-demand"},
    allocatable=Resources.of(cpu=3.8, memory=14e9, pods=58),
    requested=Resources(),
)


def _web(name: str):
    anti = {"topologyKey": wk.ZONE, "labelSelector": {"matchLabels": WEB}}
    return builders.pod(
        name,
        cpu="1",
        labels=WEB,
        affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [anti]}},
    )


def test_pods_whose_zone_needs_a_node_limits_forbid_bind_last_to_existing_nodes_in_other_zones():
    # Seed 28 of the rule checker, reduced: the domain planner gives each pod its own zone before
    # packing, preferring zones a new node could serve; the Provisioner's limits leave no new node,
    # while an existing node in each of two other zones has room. kube-scheduler binds one pod to
    # each. Before the last binds both were left unschedulable for limits.
    prov = make_provisioner(limits={"resources": {"cpu": "4"}})
    nodes = [ready_node("n-2b", zone="us-west-2b"), ready_node("n-2c", zone="us-west-2c")]
    plan = solve(
        [_web("w0"), _web("w1")],
        [prov],
        catalog(),
        existing_nodes=nodes,
        usage={"default": Resources.of(cpu=4)},
        namespaces={"default": {}},
    )
    assert not plan.unschedulable, [u.reason for u in plan.unschedulable]
    assert not plan.nodes
    assert sorted(len(pods) for pods in plan.existing.values()) == [1, 1]
    assert set(plan.existing) == {"n-2b", "n-2c"}


def test_a_pod_no_node_can_take_keeps_its_limits_reason():
    # Only one existing zone: the second pod's anti-affinity leaves it none, as kube-scheduler's would.
    prov = make_provisioner(limits={"resources": {"cpu": "4"}})
    plan = solve(
        [_web("w0"), _web("w1")],
        [prov],
        catalog(),
        existing_nodes=[ready_node("n-2b", zone="us-west-2b")],
        usage={"default": Resources.of(cpu=4)},
        namespaces={"default": {}},
    )
    assert [len(p) for p in plan.existing.values()] == [1]
    [left] = plan.unschedulable
    assert left.over_limits == "default"
    assert left.reason == (
        "provisioner default limits exceeded: no instance type fits what its limits leave (cpu 0 left)"
    )
    placed = plan.existing["n-2b"][0].key
    assert plan.bind_phases.get(placed, 0) >= 1  # binds after the rounds' pods


def test_pods_whose_zone_has_no_node_for_their_hostname_affinity_bind_last_where_one_is():
    # Seed 169 of the rule checker, reduced: pods follow a running "system" pod by hostname
    # affinity and spread over zones (maxSkew 3). The domain planner spreads them over the zones
    # new nodes could serve; only the node in us-west-2a holds a system pod karpy may pack beside
    # (the one in us-west-2c is cordoned), and a new node holds none. kube-scheduler binds all
    # three to the us-west-2a node (3 - 0 <= 3); before the last binds two were left out.
    system = builders.pod("sys", cpu="1", labels={"app": "system"})
    ready = ready_node("n-2a", zone="us-west-2a")
    ready = dataclasses.replace(ready, pods=(system,), pod_count=1, requested=system.requests)
    cordoned = dataclasses.replace(ready_node("n-2c", zone="us-west-2c"), pods=(system,), schedulable=False)
    follow = {"topologyKey": wk.HOSTNAME, "labelSelector": {"matchLabels": {"app": "system"}}}
    spread = {
        "maxSkew": 3,
        "topologyKey": wk.ZONE,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": WEB},
    }
    pods = [
        builders.pod(
            f"w{i}",
            cpu="500m",
            labels=WEB,
            affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [follow]}},
            topologySpreadConstraints=[spread],
        )
        for i in range(3)
    ]
    plan = solve(pods, [make_provisioner()], catalog(), existing_nodes=[ready, cordoned], namespaces={})
    assert not plan.unschedulable, [u.reason for u in plan.unschedulable]
    assert not plan.nodes
    assert sorted(p.key for p in plan.existing["n-2a"]) == ["default/w0", "default/w1", "default/w2"]
