"""Issue 24: karpy is no stricter than kube-scheduler on topology spread, and binds in an order in
which every pod's rules hold at its own bind.

kube-scheduler's PodTopologySpread filter checks only the incoming pod's own constraints
(kubernetes/kubernetes pkg/scheduler/framework/plugins/podtopologyspread/filtering.go, Filter and
calPreFilterState: the counts are of pods matching *its* selectors); a running pod's spread is
never re-checked. So a pod counted by another pod's spread may join that pod's zone, provided it
binds after it: the plan carries that order (`Plan.bind_phases`) and the rule checker checks each
pod at its bind in that order.
"""

from __future__ import annotations

import dataclasses

from extender.api import labels as wk
from extender.api.pod import Pod
from extender.scheduling.solver import solve
from tests.unit.scheduling import rulecheck
from tests.unit.scheduling.builders import ZONES, catalog, make_provisioner
from tests.unit.scheduling.test_rule_checker import _existing_node

A = ZONES[0]


def raw(name: str, labels: dict[str, str], cpu: str = "250m", **spec) -> dict:
    requests = {"cpu": cpu, "memory": "1Gi"}
    return {
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {"containers": [{"name": "c", "resources": {"requests": requests}}], **spec},
    }


def zone_spread(selector: dict[str, str]) -> list[dict]:
    return [
        {
            "maxSkew": 1,
            "topologyKey": wk.ZONE,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": selector},
        }
    ]


#: Empty nodes (not karpy's) in the other zones: kube-scheduler counts their zones as domains.
CLUSTER = [
    {
        "name": f"static-{zone}",
        "provisioner": "",
        "instance_type": "m5.xlarge",
        "labels": {wk.HOSTNAME: f"static-{zone}", wk.ZONE: zone},
        "taints": [],
        "allocatable": {"cpu": 4.0, "memory": 16 * 2.0**30, "pods": 58.0},
        "pods": [],
        "schedulable": False,
    }
    for zone in ZONES[1:]
]


def plan_of(raws: list[dict]):
    provisioner = make_provisioner()
    existing = [_existing_node(n) for n in CLUSTER]
    pods = [Pod.from_manifest(r) for r in raws]
    plan = solve(pods, [provisioner], catalog(), existing_nodes=existing, with_bound=False)
    return plan, provisioner


def checked(raws: list[dict]):
    """The plan, after the independent rule checker found no rule broken in its bind order."""
    plan, provisioner = plan_of(raws)
    assert rulecheck.violations(raws, CLUSTER, plan, [provisioner], catalog()) == []
    assert rulecheck.stricter_than_scheduler(raws, CLUSTER, plan, [provisioner], catalog()) == []
    return plan


def test_a_pod_counted_by_another_pods_spread_shares_its_node_and_binds_after_it():
    """Benchmark finding: a spreading pod whose selector matches itself (my-label=c) and a pod it
    counts that spreads on a selector the first does not match (my-label=g). kube-scheduler binds
    the first, then the second beside it (only the second's own spread is checked, and it counts
    no my-label=g pod): one node. Main kept the second out of the zone: two nodes."""
    spreader = raw("spreader", {"my-label": "c"}, topologySpreadConstraints=zone_spread({"my-label": "c"}))
    counted = raw("counted", {"my-label": "c"}, topologySpreadConstraints=zone_spread({"my-label": "g"}))
    plan = checked([spreader, counted])
    alone, _ = plan_of([raw("spreader", {}), raw("counted", {})])
    assert len(plan.nodes) == 1 and not plan.unschedulable
    assert plan.total_price == alone.total_price
    assert (plan.phase("default/spreader"), plan.phase("default/counted")) == (0, 1)
    # Bound in the other order, the spreader would see a skew of 2 in its zone.
    final_state = dataclasses.replace(plan, bind_phases={})
    found = rulecheck.violations([spreader, counted], CLUSTER, final_state, [make_provisioner()], catalog())
    assert [line.split(":")[0] for line in found] == ["topology spread (order-dependent)"], found


def test_a_pod_whose_only_zone_is_crowded_is_placed_not_refused():
    """Main reported the pinned pod unschedulable: 'joining ... would break the topology spread of
    pods placed there'."""
    spreader = raw("spreader", {"app": "web"}, topologySpreadConstraints=zone_spread({"app": "web"}))
    pinned = raw("pinned", {"app": "web"}, nodeSelector={wk.ZONE: A})
    plan = checked([spreader, pinned])
    assert not plan.unschedulable and len(plan.nodes) == 1
    assert plan.nodes[0].zones == (A,) and plan.bind_phases == {"default/pinned": 1}


def test_a_pod_following_a_later_pod_binds_with_it():
    """A pod whose hostname affinity selects a pod of a later bind phase binds in that phase, or
    kube-scheduler's InterPodAffinity filter would find no pod to follow at its bind."""
    affinity = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": wk.HOSTNAME, "labelSelector": {"matchLabels": {"role": "leader"}}}
            ]
        }
    }
    spreader = raw("spreader", {"app": "web"}, topologySpreadConstraints=zone_spread({"app": "web"}))
    leader = raw("leader", {"app": "web", "role": "leader"}, nodeSelector={wk.ZONE: A})
    follower = raw("follower", {}, affinity=affinity)
    plan = checked([spreader, leader, follower])
    assert plan.bind_phases == {"default/leader": 1, "default/follower": 1}


def test_settle_phases_lifts_only_followers_of_later_pods():
    from extender.scheduling.domains import settle_phases

    term = {"topologyKey": wk.HOSTNAME, "labelSelector": {"matchLabels": {"role": "leader"}}}
    affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    pods = [
        Pod.from_manifest(raw("leader", {"role": "leader"})),
        Pod.from_manifest(raw("follower", {}, affinity=affinity)),
        Pod.from_manifest(raw("other", {})),
    ]
    assert settle_phases(pods, {}, None) == {}
    lifted = settle_phases(pods, {"default/leader": 2, "gone/pod": 3}, None)
    assert lifted == {"default/leader": 2, "default/follower": 2}
