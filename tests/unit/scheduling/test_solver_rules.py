"""Scheduling rules of issue 3 on the fixture catalog: sizing, selectors, arch, spot, taints, GPUs, limits."""

from __future__ import annotations

import pytest

from extender.api import labels as wk
from extender.api.resources import Resources
from extender.scheduling.solver import ExistingNode, solve
from tests import builders
from tests.model_builders import existing_node
from tests.unit.scheduling.builders import catalog, make_provisioner


def test_five_one_cpu_pods_get_one_node_whose_cheapest_option_has_8_vcpu():
    # The first-fit packing (Karpenter 0.5's sizing). The searched plan splits it where three
    # smaller nodes cost more than improve.SPLIT_SAVING less (test_improve).
    plan = solve(builders.pods(5, cpu="1", prefix="p"), [make_provisioner()], catalog(), search_budget=0)
    assert len(plan.nodes) == 1
    assert plan.nodes[0].instance_type.cpu == 8
    assert all(t.allocatable.cpu >= 5 for t in plan.nodes[0].options)
    assert next(t for t in catalog() if t.cpu == 4 and not t.has_gpu).allocatable.cpu < 5
    assert not plan.unschedulable


def test_instance_type_selector_gives_two_c5_xlarge_nodes_three_and_two():
    plan = solve(
        builders.pods(5, cpu="1", prefix="p", nodeSelector={wk.INSTANCE_TYPE: "c5.xlarge"}),
        [make_provisioner()],
        catalog(),
    )
    assert [n.instance_type.name for n in plan.nodes] == ["c5.xlarge", "c5.xlarge"]
    assert sorted(len(n.pods) for n in plan.nodes) == [2, 3]


def test_arm64_selector_gives_only_arm64_options():
    plan = solve(
        builders.pods(3, cpu="1", prefix="p", nodeSelector={wk.ARCH: "arm64"}),
        [make_provisioner()],
        catalog(),
    )
    assert plan.nodes and all(t.arch == "arm64" for n in plan.nodes for t in n.options)


def test_spot_requirement_uses_spot_offerings_only_and_the_alias_key_works():
    for key in (wk.CAPACITY_TYPE, wk.CAPACITY_TYPE_ALIAS):
        prov = make_provisioner(requirements=[{"key": key, "operator": "In", "values": ["spot"]}])
        plan = solve(builders.pods(2, cpu="1", prefix="p"), [prov], catalog())
        assert plan.nodes and all(n.capacity_type == "spot" for n in plan.nodes)
        assert all(n.capacity_types == ("spot",) for n in plan.nodes)


def test_on_demand_requirement_excludes_spot():
    prov = make_provisioner(
        requirements=[{"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}]
    )
    plan = solve(builders.pods(2, cpu="1", prefix="p"), [prov], catalog())
    assert plan.nodes[0].capacity_type == "on-demand"


def test_untolerated_taint_makes_pod_unschedulable_with_reason():
    prov = make_provisioner(taints=[{"key": "team", "value": "a", "effect": "NoSchedule"}])
    plan = solve(builders.pods(1, cpu="1", prefix="p"), [prov], catalog())
    assert not plan.nodes
    assert "did not tolerate team=a:NoSchedule" in plan.unschedulable[0].reason
    tolerant = builders.pod(
        "t", cpu="1", tolerations=[{"key": "team", "operator": "Equal", "value": "a", "effect": "NoSchedule"}]
    )
    assert len(solve([tolerant], [prov], catalog()).nodes) == 1


def test_gpu_pod_gets_gpu_type_and_cpu_pod_never_does():
    plan = solve(
        [builders.pod("g", cpu="1", gpu=1), builders.pod("c", cpu="1")], [make_provisioner()], catalog()
    )
    by_pod = {p.key: n for n in plan.nodes for p in n.pods}
    assert all(t.gpus.get("nvidia.com/gpu") >= 1 for t in by_pod["default/g"].options)
    assert not any(t.has_gpu for t in by_pod["default/c"].options)


def test_limits_leave_pods_unschedulable_with_reason():
    prov = make_provisioner(limits={"resources": {"cpu": "10"}})
    plan = solve(builders.pods(12, prefix="p", cpu="3"), [prov], catalog())
    assert sum(n.instance_type.capacity.cpu for n in plan.nodes) <= 10
    assert plan.unschedulable and all("limits exceeded" in u.reason for u in plan.unschedulable)
    assert len(plan.unschedulable) + sum(len(n.pods) for n in plan.nodes) == 12


def test_usage_counts_against_limits():
    prov = make_provisioner(limits={"resources": {"cpu": "10"}})
    plan = solve(
        builders.pods(1, cpu="1", prefix="p"), [prov], catalog(), usage={"default": Resources.of(cpu=9.5)}
    )
    assert not plan.nodes and "limits exceeded" in plan.unschedulable[0].reason


@pytest.mark.parametrize(
    ("limit", "pod_kwargs", "count"),
    [
        ({"pods": "10"}, {"cpu": "100m"}, 40),
        ({"nvidia.com/gpu": "2"}, {"cpu": "100m", "gpu": 1}, 5),
        ({"ephemeral-storage": "50Gi"}, {"cpu": "4"}, 20),
    ],
)
def test_every_limited_resource_is_counted_over_the_nodes_capacity(limit, pod_kwargs, count):
    """Issue 24: `limits.resources: {nvidia.com/gpu: 1, pods: 5}` planned 4 GPU nodes; every key is
    now counted over the planned nodes' capacity (Karpenter counts limits over node capacity)."""
    (name,) = limit
    prov = make_provisioner(limits={"resources": limit})
    plan = solve(builders.pods(count, prefix="p", **pod_kwargs), [prov], catalog())
    used = sum(n.instance_type.capacity.get(name) for n in plan.nodes)
    assert plan.nodes and used <= Resources.parse(limit).get(name)
    assert plan.unschedulable and all("limits exceeded" in u.reason for u in plan.unschedulable)
    assert len(plan.unschedulable) + sum(len(n.pods) for n in plan.nodes) == count


def test_a_limit_reached_exactly_leaves_no_room_in_the_packer():
    """A resource with nothing left stayed unchecked while packing (Resources drops zeros) and the
    pods were only dropped by the last check; the packer now names the limit it hit."""
    prov = make_provisioner(limits={"resources": {"cpu": "10"}})
    plan = solve(
        builders.pods(1, cpu="1", prefix="p"), [prov], catalog(), usage={"default": Resources.of(cpu=10)}
    )
    assert not plan.nodes
    assert "no instance type fits what its limits leave (cpu 0 left)" in plan.unschedulable[0].reason


def test_requests_use_largest_init_container_and_overhead():
    pod = builders.pod(
        "i",
        cpu="500m",
        initContainers=[{"name": "init", "resources": {"requests": {"cpu": "3"}}}],
        overhead={"cpu": "250m"},
    )
    assert pod.requests.cpu == 3.25


def test_required_terms_are_ored_in_order():
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": wk.INSTANCE_TYPE, "operator": "In", "values": ["nope.large"]}
                        ]
                    },
                    {
                        "matchExpressions": [
                            {"key": wk.INSTANCE_TYPE, "operator": "In", "values": ["m5.large"]}
                        ]
                    },
                ]
            }
        }
    }
    plan = solve([builders.pod("a", cpu="500m", affinity=affinity)], [make_provisioner()], catalog())
    assert plan.nodes[0].instance_type.name == "m5.large"


def test_unsatisfiable_preference_is_relaxed_with_a_note():
    affinity = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 10,
                    "preference": {
                        "matchExpressions": [{"key": wk.ZONE, "operator": "In", "values": ["mars-1a"]}]
                    },
                },
            ]
        }
    }
    plan = solve([builders.pod("a", cpu="1", affinity=affinity)], [make_provisioner()], catalog())
    assert len(plan.nodes) == 1
    assert any("Relaxed preferred node affinity of pod default/a" in n for n in plan.notes)


def test_satisfiable_preference_is_honoured():
    affinity = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 10,
                    "preference": {
                        "matchExpressions": [{"key": wk.ZONE, "operator": "In", "values": ["us-west-2c"]}]
                    },
                },
            ]
        }
    }
    plan = solve([builders.pod("a", cpu="1", affinity=affinity)], [make_provisioner()], catalog())
    assert plan.nodes[0].zone == "us-west-2c"


def test_daemonsets_count_against_nodes():
    daemon = builders.pod("ds", cpu="1500m")
    plan = solve(builders.pods(5, cpu="1", prefix="p"), [make_provisioner()], catalog(), daemonsets=[daemon])
    assert all(t.allocatable.cpu >= 6.5 for t in plan.nodes[0].options)


def test_daemonset_host_ports_are_kept_free_on_new_nodes():
    """Issue 24: kube-scheduler's NodePorts refuses a second pod on a node's host port, and a
    DaemonSet pod will run on every new node it lands on; a pod asking for the same port never
    shares a node with it (karpy planned it there, then one of the two stayed pending)."""
    port = [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 9100}]}]
    daemon = builders.pod("exporter", cpu="100m", containers=port)
    clash = builders.pod("web", cpu="100m", containers=port)
    plan = solve([clash], [make_provisioner()], catalog(), daemonsets=[daemon])
    assert not plan.nodes and plan.unschedulable
    other = builders.pod(
        "web", cpu="100m", containers=[{"name": "c", "ports": [{"containerPort": 80, "hostPort": 8080}]}]
    )
    assert solve([other], [make_provisioner()], catalog(), daemonsets=[daemon]).nodes
    # A DaemonSet that does not land on the Provisioner's nodes (an untolerated taint) keeps none.
    tainted = make_provisioner(taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}])
    tolerant = builders.pod(
        "web", cpu="100m", containers=port, tolerations=[{"key": "dedicated", "operator": "Exists"}]
    )
    assert solve([tolerant], [tainted], catalog(), daemonsets=[daemon]).nodes


def test_kubelet_max_pods_override_caps_pods_per_node():
    prov = make_provisioner(kubeletConfiguration={"maxPods": 3})
    plan = solve(builders.pods(7, prefix="p", cpu="100m"), [prov], catalog())
    assert all(len(n.pods) <= 3 for n in plan.nodes) and len(plan.nodes) == 3


def test_hostname_anti_affinity_puts_each_pod_on_its_own_node():
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": wk.HOSTNAME, "labelSelector": {"matchLabels": {"app": "db"}}}
            ]
        }
    }
    plan = solve(
        builders.pods(3, cpu="1", prefix="p", labels={"app": "db"}, affinity=anti),
        [make_provisioner()],
        catalog(),
    )
    assert len(plan.nodes) == 3


def test_zone_spread_balances_pods_across_zones():
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": wk.ZONE,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "w"}},
        }
    ]
    plan = solve(
        builders.pods(6, cpu="1", prefix="p", labels={"app": "w"}, topologySpreadConstraints=spread),
        [make_provisioner()],
        catalog(),
    )
    per_zone = {}
    for node in plan.nodes:
        per_zone[node.zone] = per_zone.get(node.zone, 0) + len(node.pods)
    assert sorted(per_zone.values()) == [2, 2, 2]


def test_existing_nodes_are_filled_first():
    node = existing_node(
        "n1",
        zone=None,
        hostname=False,
        labels={wk.ARCH: "amd64"},
        allocatable=Resources.of(cpu=3.8, memory=14e9, pods=58),
        requested=Resources.of(cpu=1),
        pod_count=1,
    )
    plan = solve(
        builders.pods(3, cpu="1", prefix="p"), [make_provisioner()], catalog(), existing_nodes=[node]
    )
    assert len(plan.existing["n1"]) == 2 and len(plan.nodes) == 1


def test_weight_picks_provisioner_and_named_pod_overrides():
    heavy = make_provisioner("heavy", weight=10)
    light = make_provisioner("light")
    assert (
        solve(builders.pods(1, cpu="1", prefix="p"), [light, heavy], catalog()).nodes[0].provisioner
        == "heavy"
    )
    named = builders.pod("n", cpu="1", nodeSelector={wk.PROVISIONER_NAME: "light"})
    assert solve([named], [light, heavy], catalog()).nodes[0].provisioner == "light"


def test_plan_describe_uses_karpenter_voice():
    lines = solve(builders.pods(5, prefix="p", cpu="250m"), [make_provisioner()], catalog()).describe()
    assert lines[0].startswith("Computed packing for 5 pod(s) with instance type option(s) [")


def test_lower_bound_is_below_plan_cost():
    plan = solve(builders.pods(40, prefix="p", cpu="1500m", memory="3Gi"), [make_provisioner()], catalog())
    assert 0 < plan.lower_bound <= plan.total_price


def test_the_controller_can_skip_the_bound_without_changing_the_plan():
    args = (builders.pods(40, prefix="p", cpu="1500m", memory="3Gi"), [make_provisioner()], catalog())
    with_bound, without = solve(*args), solve(*args, with_bound=False)
    assert without.lower_bound == 0.0 and with_bound.lower_bound > 0
    assert [(n.instance_type.name, [p.key for p in n.pods]) for n in without.nodes] == [
        (n.instance_type.name, [p.key for p in n.pods]) for n in with_bound.nodes
    ]
    assert "lower bound" in with_bound.describe()[-1] and "lower bound" not in without.describe()[-1]


def test_burstable_types_are_offered_only_when_named():
    plan = solve(builders.pods(3, prefix="p", cpu="250m", memory="256Mi"), [make_provisioner()], catalog())
    assert not any(t.burstable for n in plan.nodes for t in n.options)
    named_pods = builders.pods(1, prefix="p", cpu="250m", nodeSelector={wk.INSTANCE_TYPE: "t3.medium"})
    named = solve(named_pods, [make_provisioner()], catalog())
    assert [n.instance_type.name for n in named.nodes] == ["t3.medium"]


def test_nodes_use_the_type_cheapest_per_pod_rather_than_the_largest():
    plan = solve(builders.pods(60, prefix="p", cpu="1", memory="1Gi"), [make_provisioner()], catalog())
    cheapest = {}
    for t in catalog():
        if t.has_gpu or t.burstable:
            continue
        held = int(min(t.allocatable.cpu // 1, t.allocatable.memory // 2**30, t.allocatable.get("pods")))
        if held:
            cheapest[t.name] = min(o.price for o in t.offerings) / held
    best_rate = min(cheapest.values())
    # Every pod at the best standalone rate, plus at most one partly filled node.
    assert plan.total_price <= 60 * best_rate + max(n.price for n in plan.nodes) + 1e-9
    assert plan.gap is not None and plan.gap <= 0.2


def test_a_partly_filled_last_node_shrinks_to_the_cheapest_type_holding_it():
    plan = solve(builders.pods(61, prefix="p", cpu="1", memory="1Gi"), [make_provisioner()], catalog())
    smallest = min(plan.nodes, key=lambda n: len(n.pods))
    assert smallest.instance_type is smallest.options[0]
    assert smallest.price == min(o.price for o in smallest.options[0].offerings)
    assert all(min(o.price for o in t.offerings) >= smallest.price for t in smallest.options)


def test_the_provisioner_whose_limits_dropped_a_pod_is_named_by_the_plan_not_its_text():
    """The LimitExceeded Event goes to the Provisioner whose limits dropped the pod first, read from
    `Unschedulable.over_limits` (issue 23: causes are set by their producer, not parsed from text)."""
    small = make_provisioner("small", weight=10, limits={"resources": {"cpu": "2"}})
    other = make_provisioner(
        "other",
        requirements=[{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["t3.nano"]}],
    )
    plan = solve(builders.pods(1, prefix="p", cpu="4"), [small, other], catalog())
    (item,) = plan.unschedulable
    assert item.over_limits == "small" and item.reason.startswith("provisioner small limits exceeded")
    plan = solve(
        builders.pods(1, prefix="p", cpu="4"),
        [make_provisioner(limits={"resources": {"cpu": "2"}})],
        catalog(),
    )
    assert plan.unschedulable[0].over_limits == "default"
    assert (
        solve(builders.pods(1, prefix="p", cpu="500"), [make_provisioner()], catalog())
        .unschedulable[0]
        .over_limits
        is None
    )


def test_the_heaviest_preference_chooses_between_provisioners():
    """Issue 24: a Deployment preferring arm64 (weight 50) over amd64 (weight 1), with a heavier
    Provisioner allowing amd64 only and another allowing both, got amd64 nodes. Karpenter treats the
    heaviest preferred term as a requirement across every Provisioner and relaxes it only when none
    can meet it (karpenter core scheduling/preferences.go, suite "should schedule to the preferred
    node affinity" across NodePools)."""
    arch = "kubernetes.io/arch"
    amd = make_provisioner(
        "amd", weight=50, requirements=[{"key": arch, "operator": "In", "values": ["amd64"]}]
    )
    both = make_provisioner(
        "both", requirements=[{"key": arch, "operator": "In", "values": ["amd64", "arm64"]}]
    )
    preferred = [
        {
            "weight": 50,
            "preference": {"matchExpressions": [{"key": arch, "operator": "In", "values": ["arm64"]}]},
        },
        {
            "weight": 1,
            "preference": {"matchExpressions": [{"key": arch, "operator": "In", "values": ["amd64"]}]},
        },
    ]
    affinity = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred}}
    plan = solve(builders.pods(3, cpu="1", prefix="p", affinity=affinity), [amd, both], catalog())
    assert {n.provisioner for n in plan.nodes} == {"both"}
    assert {t.arch for n in plan.nodes for t in n.options} == {"arm64"}
    # No Provisioner meets it: relaxed, and the heavier Provisioner is used as before.
    plan = solve(builders.pods(3, cpu="1", prefix="p", affinity=affinity), [amd], catalog())
    assert {n.provisioner for n in plan.nodes} == {"amd"} and not plan.unschedulable


def test_required_hostname_affinity_with_several_terms_needs_one_pod_matching_them_all():
    """Issue 24, kube-scheduler InterPodAffinity (podMatchesAllAffinityTerms): an existing pod counts
    for a pod's required affinity terms only when it matches every one of them. A node holding one
    pod per term satisfies none; karpy checked the terms one by one and packed the pod there."""

    def term(key: str, value: str) -> dict:
        return {"labelSelector": {"matchLabels": {key: value}}, "topologyKey": wk.HOSTNAME}

    affinity = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [term("app", "a"), term("tier", "db")]
        }
    }

    def node(*labelled: dict[str, str]) -> ExistingNode:
        running = tuple(
            builders.pod(f"run-{i}", cpu="100m", labels=labels) for i, labels in enumerate(labelled)
        )
        return existing_node("n1", pods=running, requested=Resources.parse({"cpu": "200m"}))

    follower = builders.pod("follower", cpu="100m", affinity=affinity)
    split = solve(
        [follower], [make_provisioner()], catalog(), existing_nodes=[node({"app": "a"}, {"tier": "db"})]
    )
    assert not split.existing and not split.nodes and split.unschedulable
    both = solve(
        [follower], [make_provisioner()], catalog(), existing_nodes=[node({"app": "a", "tier": "db"})]
    )
    assert [p.key for p in both.existing["n1"]] == ["default/follower"]
