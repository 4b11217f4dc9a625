"""Issue 33: a zone spread whose selector does not match its own pod.

kube-scheduler's PodTopologySpread Filter (pkg/scheduler/framework/plugins/podtopologyspread/
filtering.go) admits a node when `matchNum + selfMatchNum - minMatchNum <= maxSkew`, where
selfMatchNum is 1 only if the incoming pod matches the constraint's selector itself. A pod outside
its own selector therefore adds nothing to the count and may join a domain that already holds one
matching pod (1 + 0 - 0 <= 1). The domain planner allowed it, but then sent the pod to the least
loaded allowed domain, away from the matching pod's node: a second node for nothing.
"""

from __future__ import annotations

import random

from benchmarks.packing import GIB, diverse_pods, fake_types
from extender.api import labels as wk
from extender.api.provisioner import Provisioner
from extender.api.resources import Resources
from extender.scheduling.solver import solve
from tests import builders
from tests.unit.scheduling.test_topology_fidelity import running_node

TYPES = fake_types()
PROVISIONER = Provisioner(name="default", limits=Resources.of(cpu=10_000_000, memory=10_000_000 * GIB))
ZONE_1 = "test-zone-1"


#: Karpenter's diverse benchmark pods' zone spread (maxSkew 1, DoNotSchedule), over my-label=c.
OVER_C = [builders.spread(wk.ZONE, selector={"matchLabels": {"my-label": "c"}})]
#: The pods' shape here: 100m CPU, 100Mi, no uid.
SHAPE: dict = {"uid": "", "cpu": "100m", "memory": "100Mi"}


def test_a_spread_pod_outside_its_selector_shares_the_node_of_the_one_matching_pod():
    """count 1 + selfMatchNum 0 - min 0 = 1 <= maxSkew 1 (filtering.go): one node, as Karpenter plans.
    The matching pod is the larger, so it gets its domain first (was: 2 nodes, $0.90 against $0.60)."""
    pods = [
        builders.pod("spread", **SHAPE, labels={"my-label": "f"}, spreads=OVER_C),
        builders.pod("matching", uid="", cpu="1500m", memory="100Mi", labels={"my-label": "c"}),
    ]
    plan = solve(pods, [PROVISIONER], TYPES)
    assert [sorted(p.name for p in n.pods) for n in plan.nodes] == [["matching", "spread"]]
    assert plan.total_price == plan.lower_bound


def test_five_of_karpenters_diverse_pods_plan_one_node_at_the_lower_bound():
    """Karpenter's makeDiversePods(5) on its 400 fake types (benchmarks/packing.py), seed 7: the zone
    spread pod (my-label=f over my-label=a) joins the node of the one my-label=a pod (was: 2 nodes,
    $1.50 against a bound of $0.90)."""
    pods = diverse_pods(5, random.Random(7))
    spreader = next(p for p in pods if any(s.topology_key == wk.ZONE for s in p.topology_spread))
    assert spreader.labels["my-label"] != spreader.topology_spread[0].selector.match_labels[0][1]
    plan = solve(pods, [PROVISIONER], TYPES)
    assert len(plan.nodes) == 1 and not plan.unschedulable
    assert abs(plan.total_price - plan.lower_bound) < 1e-9


def test_the_rule_still_keeps_a_spread_pod_out_of_a_domain_over_its_skew():
    """Two matching pods running in zone 1 and none elsewhere: 2 + 0 - 0 > 1 there, so the spread pod
    goes to another zone even though it does not match its own selector."""
    running = running_node(
        "n1",
        zone=ZONE_1,
        pods=[builders.pod(f"r{i}", **SHAPE, labels={"my-label": "c"}) for i in (1, 2)],
        requested=Resources.of(cpu=0.2),  # their CPU only
    )
    spreader = builders.pod("spread", **SHAPE, labels={"my-label": "f"}, spreads=OVER_C)
    plan = solve([spreader], [PROVISIONER], TYPES, existing_nodes=[running])
    assert not plan.existing and len(plan.nodes) == 1
    assert ZONE_1 not in plan.nodes[0].zones


def test_a_spread_that_counts_its_own_pod_still_spreads():
    """selfMatchNum 1: replicas selecting themselves go to distinct zones (1 + 1 - 0 > 1)."""
    pods = [builders.pod(f"r{i}", **SHAPE, labels={"my-label": "c"}, spreads=OVER_C) for i in range(3)]
    plan = solve(pods, [PROVISIONER], TYPES)
    assert sorted(z for n in plan.nodes for z in n.zones) == ["test-zone-1", "test-zone-2", "test-zone-3"]
