"""Issue 11 findings, each as the case that failed on main before the fix (kube-scheduler's
PodTopologySpread / InterPodAffinity / NodePorts plugins are the reference)."""

from __future__ import annotations

from functools import partial

from extender.api import labels as wk
from extender.api.resources import Resources
from extender.scheduling.solver import solve
from tests import builders
from tests.model_builders import existing_node
from tests.unit.scheduling.builders import ZONES, catalog, make_provisioner

APP = {"app": "web"}


#: A Provisioner's m5.2xlarge (8 CPU, 32Gi, 58 pods); keywords as tests.model_builders.existing_node.
running_node = partial(
    existing_node,
    instance_type="m5.2xlarge",
    labels={wk.PROVISIONER_NAME: "default"},
    allocatable=Resources.of(cpu=8.0, memory=32 * 2**30, pods=58),
)


def anti(key, labels=APP):
    term = {"topologyKey": key, "labelSelector": {"matchLabels": labels}}
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def spread(key, *, skew=1, when="DoNotSchedule", selector=APP, **extra):
    item = {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": when, **extra}
    if selector is not None:
        item["labelSelector"] = {"matchLabels": selector}
    return [item]


def zones_of(plan):
    """Zone of every new pod; a planned node must have exactly one zone."""
    result = {}
    for node in plan.nodes:
        assert len(node.zones) == 1, node.zones
        result.update({p.key: node.zones[0] for p in node.pods})
    return result


def test_zone_anti_affinity_avoids_zones_of_running_pods():
    """InterPodAffinity: required anti-affinity counts pods already running (was: batch only)."""
    running = [
        running_node(f"n{i}", zone=z, pods=[builders.pod(f"r{i}", cpu="1", labels=APP)], schedulable=False)
        for i, z in enumerate(ZONES[:2])
    ]
    pod = builders.pod("new", cpu="1", labels=APP, affinity=anti(wk.ZONE))
    plan = solve([pod], [make_provisioner()], catalog(), existing_nodes=running)
    assert zones_of(plan) == {"default/new": ZONES[2]}


def test_running_pods_anti_affinity_repels_incoming_pod_symmetry():
    """InterPodAffinity symmetry: a running pod's anti-affinity excludes its domain for pods it selects."""
    carrier = builders.pod("r", cpu="1", labels={"app": "db"}, affinity=anti(wk.ZONE, labels=APP))
    running = [running_node("n0", zone=ZONES[0], pods=[carrier], schedulable=False)]
    pods = [builders.pod(f"p{i}", cpu="1", labels=APP) for i in range(3)]
    plan = solve(pods, [make_provisioner()], catalog(), existing_nodes=running)
    assert sum(len(n.pods) for n in plan.nodes) == 3
    assert all(ZONES[0] not in n.zones for n in plan.nodes)


def test_hostname_anti_affinity_against_running_pod_on_karpy_node_with_room():
    """InterPodAffinity: a karpy node with room but a matching pod is not used."""
    node = running_node("n0", zone=ZONES[0], pods=[builders.pod("r", cpu="1", labels=APP)])
    pod = builders.pod("new", cpu="1", labels=APP, affinity=anti(wk.HOSTNAME))
    plan = solve([pod], [make_provisioner()], catalog(), existing_nodes=[node])
    assert not plan.existing and len(plan.nodes) == 1
    plain = solve([builders.pod("plain", cpu="1")], [make_provisioner()], catalog(), existing_nodes=[node])
    assert plain.existing == {"n0": (builders.pod("plain", cpu="1"),)}


def test_running_pods_hostname_anti_affinity_keeps_rule_free_pods_off_its_node():
    """InterPodAffinity symmetry on kubernetes.io/hostname, when only the running pod has a rule:
    the packer counts running pods for hostname terms only when a term is in play, and this term
    comes from the running pod alone."""
    carrier = builders.pod("r", cpu="1", labels={"app": "db"}, affinity=anti(wk.HOSTNAME, labels=APP))
    node = running_node(
        "n0", zone=ZONES[0], pods=[carrier, builders.pod("other", cpu="1", labels={"app": "cache"})]
    )
    plan = solve(
        [builders.pod("new", cpu="1", labels=APP)], [make_provisioner()], catalog(), existing_nodes=[node]
    )
    assert not plan.existing and len(plan.nodes) == 1
    plain = solve([builders.pod("plain", cpu="1")], [make_provisioner()], catalog(), existing_nodes=[node])
    assert plain.existing == {"n0": (builders.pod("plain", cpu="1"),)}


def test_zone_spread_counts_running_pods():
    """PodTopologySpread: 3 matching pods already in zone a -> new pods go to b and c first."""
    running = [
        running_node(
            "n0",
            zone=ZONES[0],
            pods=[builders.pod(f"r{i}", cpu="1", labels=APP) for i in range(3)],
            schedulable=False,
        )
    ]
    pods = [
        builders.pod(f"p{i}", cpu="1", labels=APP, topologySpreadConstraints=spread(wk.ZONE))
        for i in range(4)
    ]
    zones = zones_of(solve(pods, [make_provisioner()], catalog(), existing_nodes=running))
    assert sorted(zones.values()) == sorted([ZONES[1], ZONES[1], ZONES[2], ZONES[2]])


def test_nil_label_selector_spread_constrains_nothing():
    """PodTopologySpread: a nil labelSelector matches no pod, so the pods may share a zone and node."""
    pods = [
        builders.pod(f"p{i}", cpu="1", labels=APP, topologySpreadConstraints=spread(wk.ZONE, selector=None))
        for i in range(3)
    ]
    plan = solve(pods, [make_provisioner()], catalog())
    assert len(plan.nodes) == 1 and not plan.unschedulable


def test_max_skew_two_allows_two_ahead():
    pods = [
        builders.pod(f"p{i}", cpu="1", labels=APP, topologySpreadConstraints=spread(wk.ZONE, skew=2))
        for i in range(6)
    ]
    counts = sorted(
        list(zones_of(solve(pods, [make_provisioner()], catalog())).values()).count(z) for z in ZONES
    )
    assert counts[-1] - counts[0] <= 2 and sum(counts) == 6


def test_spread_on_capacity_type_and_on_a_provisioner_label():
    """Any label key is a topology key (was: zone and hostname only, others exit 2 / dropped)."""
    ct = [{"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["spot", "on-demand"]}]
    pods = [
        builders.pod(f"p{i}", cpu="1", labels=APP, topologySpreadConstraints=spread(wk.CAPACITY_TYPE))
        for i in range(4)
    ]
    plan = solve(pods, [make_provisioner(requirements=ct)], catalog())
    per = [n.capacity_types for n in plan.nodes for _ in n.pods]
    assert all(len(c) == 1 for c in per) and sorted(c[0] for c in per) == ["on-demand"] * 2 + ["spot"] * 2
    # A Provisioner's own label is a domain too: two Provisioners, one rack each.
    racks = [make_provisioner(f"rack-{r}", labels={"rack": r}) for r in ("r1", "r2")]
    pods = [
        builders.pod(f"q{i}", cpu="1", labels=APP, topologySpreadConstraints=spread("rack")) for i in range(4)
    ]
    plan = solve(pods, racks, catalog())
    assert sorted(n.labels["rack"] for n in plan.nodes for _ in n.pods) == ["r1", "r1", "r2", "r2"]


def test_topology_key_no_node_can_carry_is_reported_not_dropped():
    pods = [builders.pod("p", cpu="1", labels=APP, topologySpreadConstraints=spread("rack"))]
    plan = solve(pods, [make_provisioner()], catalog())
    assert not plan.nodes and "rack" in plan.unschedulable[0].reason


def test_schedule_anyway_is_a_preference():
    """ScheduleAnyway spread is honoured when possible, never a reason to leave a pod pending."""
    pods = [
        builders.pod(
            f"p{i}",
            cpu="1",
            labels=APP,
            topologySpreadConstraints=spread(wk.ZONE, when="ScheduleAnyway"),
            nodeSelector={wk.ZONE: ZONES[0]},
        )
        for i in range(3)
    ]
    plan = solve(pods, [make_provisioner()], catalog())
    assert not plan.unschedulable and sum(len(n.pods) for n in plan.nodes) == 3


def test_host_ports_conflict_on_a_node():
    """NodePorts: two pods with the same hostPort never share a node (running pods included)."""
    ports = [
        {
            "name": "c",
            "resources": {"requests": {"cpu": "100m"}},
            "ports": [{"containerPort": 80, "hostPort": 8080}],
        }
    ]
    pods = [builders.pod(f"p{i}", cpu="1", containers=ports) for i in range(3)]
    plan = solve(pods, [make_provisioner()], catalog())
    assert len(plan.nodes) == 3
    node = running_node("n0", zone=ZONES[0], pods=[builders.pod("r", cpu="1", containers=ports)])
    plan = solve(pods[:1], [make_provisioner()], catalog(), existing_nodes=[node])
    assert not plan.existing and len(plan.nodes) == 1


def test_limits_fall_back_to_the_next_provisioner():
    """Karpenter: a Provisioner at its limit does not take pods; the next one that fits does."""
    first = make_provisioner("first", weight=10, limits={"resources": {"cpu": "1"}})
    second = make_provisioner("second")
    plan = solve([builders.pod("p", cpu="2")], [first, second], catalog())
    assert [n.provisioner for n in plan.nodes] == ["second"] and not plan.unschedulable


def test_limits_use_a_smaller_node_instead_of_dropping_all():
    """Limit 8 cpu: 6 one-cpu pods do not fit one 8-vCPU node's allocatable; two 4-vCPU nodes do."""
    prov = make_provisioner(limits={"resources": {"cpu": "8"}})
    plan = solve([builders.pod(f"p{i}", cpu="1") for i in range(6)], [prov], catalog())
    placed = sum(len(n.pods) for n in plan.nodes)
    assert sum(n.instance_type.capacity.cpu for n in plan.nodes) <= 8
    assert placed >= 4, plan.describe()


def test_unmodelled_pod_is_reported_and_the_rest_planned():
    pvc = builders.pod("db", cpu="1", volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "d"}}])
    plan = solve([pvc, builders.pod("web", cpu="1")], [make_provisioner()], catalog())
    assert [u.pod.key for u in plan.unschedulable] == ["default/db"] and plan.unschedulable[0].unmodelled
    assert [p.key for n in plan.nodes for p in n.pods] == ["default/web"]


def test_deprecated_labels_are_understood():
    pod = builders.pod(
        "p",
        cpu="1",
        nodeSelector={"beta.kubernetes.io/arch": "arm64", "failure-domain.beta.kubernetes.io/zone": ZONES[1]},
    )
    plan = solve([pod], [make_provisioner()], catalog())
    assert plan.nodes[0].zones == (ZONES[1],) and all(t.arch == "arm64" for t in plan.nodes[0].options)


def test_zone_spread_with_self_affinity_checks_skew():
    """Zone spread + zone self-affinity: kube-scheduler admits the first pod anywhere, then the
    affinity pins the rest to its zone where the spread allows only maxSkew more (was: pinned all)."""
    affinity = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": wk.ZONE, "labelSelector": {"matchLabels": APP}}
            ]
        }
    }
    pods = [
        builders.pod(
            f"p{i}", cpu="1", labels=APP, affinity=affinity, topologySpreadConstraints=spread(wk.ZONE)
        )
        for i in range(3)
    ]
    plan = solve(pods, [make_provisioner()], catalog())
    # The first pod goes anywhere; the second must join its zone, where the skew would be 2 > 1.
    assert len(zones_of(plan)) == 1 and len(plan.unschedulable) == 2
    assert all("topology spread" in u.reason for u in plan.unschedulable)


def test_first_pod_of_a_zone_affinity_group_may_start_it_beside_unrelated_nodes():
    """InterPodAffinity: with no matching pod anywhere, a pod matching its own term goes anywhere.
    (Failed before: an existing node without matching pods counted as a match of zero, which hid
    the exception, so the group never started.)"""
    affinity = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": wk.ZONE, "labelSelector": {"matchLabels": APP}}
            ]
        }
    }
    unrelated = [
        running_node(
            "n0",
            zone=ZONES[1],
            pods=[builders.pod("other", cpu="1", labels={"app": "db"})],
            schedulable=False,
        )
    ]
    pods = [builders.pod(f"p{i}", cpu="1", labels=APP, affinity=affinity) for i in range(3)]
    plan = solve(pods, [make_provisioner()], catalog(), existing_nodes=unrelated)
    assert not plan.unschedulable and len(set(zones_of(plan).values())) == 1
