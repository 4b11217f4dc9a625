"""explain(): each pool's first rule for a waiting pod, in words, and smallest_change() re-solving
with one edit. Each test names the rule's source (kube-scheduler plugin or Karpenter behaviour)."""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from extender.api.nodepool import load_nodepool
from extender.api.resources import Resources
from extender.scheduling import explain as rules
from extender.scheduling.explain import World, explain
from extender.scheduling.remedy import candidates, smallest_change
from tests import builders
from tests.builders import nodepool_manifest
from tests.model_builders import existing_node
from tests.unit.scheduling.builders import catalog, make_provisioner

ARCH = "kubernetes.io/arch"
ZONE = "topology.kubernetes.io/zone"


#: A cordoned m5.large karpy does not own (2 CPU, 8Gi, 29 pods, 1 CPU in use); keywords as
#: tests.model_builders.existing_node.
unmanaged_node = partial(
    existing_node,
    provisioner="",
    instance_type="m5.large",
    allocatable=Resources({"cpu": 2, "memory": 8 * 2**30, "pods": 29}),
    requested=Resources({"cpu": 1}),
    schedulable=False,
)


def arm():
    return make_provisioner("arm", requirements=[{"key": ARCH, "operator": "In", "values": ["arm64"]}])


def verdict(explanation, name):
    return next(v for v in explanation.verdicts if v.pool.name == name)


def test_arch_requirement_names_the_value_and_what_the_pool_allows():
    """kube-scheduler NodeAffinity / Karpenter requirement compatibility."""
    world = World([arm()], catalog())
    pod = builders.pod("a", cpu="1", nodeSelector={ARCH: "amd64"})
    found = explain(pod, world)
    v = verdict(found, "arm")
    assert v.rule == rules.REQUIREMENT
    assert v.message == "the pod requires kubernetes.io/arch=amd64; Provisioner arm allows only arm64"
    assert not found.admitted and found.reason == rules.REQUIREMENT
    remedy, tried = smallest_change(found, world)
    assert remedy is not None and tried == 1
    assert remedy.edit.change == {"op": "dropRequirement", "key": ARCH}
    assert remedy.placement.instance_type and remedy.placement.price > 0


def test_zone_requirement_widening_the_pool_is_re_solved():
    """kube-scheduler NodeAffinity on topology.kubernetes.io/zone; the pool edit is solved, not guessed."""
    zonal = make_provisioner("z", requirements=[{"key": ZONE, "operator": "In", "values": ["us-west-2a"]}])
    world = World([zonal], catalog())
    pod = builders.pod(
        "b",
        cpu="1",
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["us-west-2b"]}]}
                    ]
                }
            }
        },
    )
    found = explain(pod, world)
    assert verdict(found, "z").message == (
        "the pod requires topology.kubernetes.io/zone=us-west-2b; Provisioner z allows only us-west-2a"
    )
    edits = [e.description for e in candidates(found)]
    assert edits == [
        "drop the pod's requirement on topology.kubernetes.io/zone",
        "allow topology.kubernetes.io/zone us-west-2b in Provisioner z",
    ]
    remedy, _ = smallest_change(found, world)
    assert remedy is not None and remedy.placement.zone == "us-west-2a"


def test_untolerated_taint_and_the_toleration_that_admits():
    """kube-scheduler TaintToleration."""
    tainted = make_provisioner("gpu", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}])
    world = World([tainted], catalog())
    found = explain(builders.pod("c", cpu="1"), world)
    v = verdict(found, "gpu")
    assert (v.rule, v.message) == (
        rules.TAINT,
        "taint dedicated=gpu:NoSchedule of Provisioner gpu is not tolerated by the pod",
    )
    remedy, _ = smallest_change(found, world)
    assert remedy is not None
    assert remedy.edit.change == {
        "op": "addToleration",
        "toleration": {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
    }


def test_too_big_names_the_resource_and_the_largest_type():
    """kube-scheduler NodeResourcesFit: no type's allocatable holds the request."""
    small = make_provisioner(
        "web",
        requirements=[
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large", "m5.xlarge"]}
        ],
    )
    world = World([small], catalog())
    found = explain(builders.pod("d", cpu="70"), world)
    v = verdict(found, "web")
    assert v.rule == rules.TOO_BIG
    assert v.message.startswith("requests 70 CPU; the largest type Provisioner web allows has 3.")
    assert v.message.endswith("allocatable (m5.xlarge)")
    remedy, _ = smallest_change(found, world)
    assert remedy is not None and remedy.edit.change["op"] == "setRequirements"
    assert remedy.edit.change["requirements"] == []


def test_unknown_extended_resource():
    """kube-scheduler NodeResourcesFit: a resource no node lists has allocatable 0."""
    world = World([make_provisioner("default")], catalog())
    pod = builders.pod("e", cpu="1")
    pod = replace(pod, requests=pod.requests + Resources({"example.com/foo": 1}))
    found = explain(pod, world)
    v = verdict(found, "default")
    assert v.rule == rules.UNKNOWN_RESOURCE
    assert (
        v.message
        == "the pod requests example.com/foo; no instance type Provisioner default may launch has it"
    )
    remedy, _ = smallest_change(found, world)
    assert remedy is not None and remedy.edit.change == {
        "op": "dropRequests",
        "resources": ["example.com/foo"],
    }


def test_limit_names_used_of_limit_and_what_the_pod_needs():
    """Karpenter counts each node's capacity against the pool's limits (live and in-flight in karpy)."""
    batch = make_provisioner("batch", limits={"resources": {"cpu": "1000"}})
    world = World([batch], catalog(), usage={"batch": Resources({"cpu": 998})})
    found = explain(builders.pod("f", cpu="3"), world)
    v = verdict(found, "batch")
    assert v.rule == rules.LIMIT
    assert v.message.startswith("Provisioner batch is at its cpu limit: 998 of 1000 used, the pod needs 4 (")
    remedy, _ = smallest_change(found, world)
    assert remedy is not None and remedy.edit.change == {"op": "setLimit", "resource": "cpu", "value": "1002"}


def test_min_values_counts_what_the_types_give():
    """Karpenter SatisfiesMinValues (pkg/cloudprovider/types.go)."""
    spec = {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        "requirements": [
            {
                "key": "node.kubernetes.io/instance-type",
                "operator": "In",
                "values": ["m5.large", "m5.xlarge"],
            },
            {"key": "karpenter.k8s.aws/instance-family", "operator": "Exists", "minValues": 2},
        ],
    }
    mv = load_nodepool(nodepool_manifest(name="mv", template_spec=spec))
    world = World([mv], catalog())
    found = explain(builders.pod("g", cpu="1"), world)
    v = verdict(found, "mv")
    assert v.rule == rules.MIN_VALUES
    assert v.message == (
        "NodePool mv needs 2 values of karpenter.k8s.aws/instance-family among a node's instance types;"
        " the types that hold the pod give 1 (m5)"
    )
    remedy, _ = smallest_change(found, world)
    assert remedy is not None and remedy.edit.description.startswith("lower minValues")


def test_zone_anti_affinity_against_a_running_pod():
    """kube-scheduler InterPodAffinity: required anti-affinity on the zone of a matching running pod."""
    zonal = make_provisioner("z", requirements=[{"key": ZONE, "operator": "In", "values": ["us-west-2a"]}])
    running = replace(builders.pod("db", cpu="1", labels={"app": "db"}), node_name="n1")
    node = unmanaged_node("n1", zone="us-west-2a", pods=[running])
    world = World([zonal], catalog(), existing_nodes=[node])
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": ZONE, "labelSelector": {"matchLabels": {"app": "db"}}}
            ]
        }
    }
    found = explain(builders.pod("h", cpu="1", labels={"app": "db"}, affinity=anti), world)
    v = verdict(found, "z")
    assert v.rule == rules.ANTI_AFFINITY, v.message
    remedy, _ = smallest_change(found, world)
    assert remedy is not None and remedy.edit.change == {"op": "dropAntiAffinity", "index": 0}


def test_launching_pool_and_ranking():
    """Karpenter tries pools by weight; the explanation keeps weight order and ranks takers first."""
    tainted = make_provisioner(
        "gpu", weight=10, taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    )
    world = World([arm(), tainted], catalog())
    found = explain(builders.pod("i", cpu="1"), world)
    assert [v.pool.name for v in found.verdicts] == ["gpu", "arm"]
    assert found.ranked()[0].pool.name == "arm" and found.ranked()[0].rule == rules.LAUNCH
    assert found.admitted and found.placement is not None and found.placement.provisioner == "arm"
    assert verdict(found, "arm").message.startswith("would launch ")


def test_candidates_are_capped():
    """Bounded work: at most `limit` edits are solved."""
    pools = [
        make_provisioner(f"t{i}", taints=[{"key": f"k{i}", "value": "v", "effect": "NoSchedule"}])
        for i in range(5)
    ]
    world = World(pools, catalog())
    found = explain(builders.pod("j", cpu="500"), world)
    remedy, tried = smallest_change(found, world, limit=3)
    assert remedy is None and tried == 3


def test_volume_zone_names_the_volumes_zone():
    """kube-scheduler VolumeBinding/VolumeZone: a bound volume's node affinity pins the pod's zone."""
    from extender.api.provisioner import Requirement

    zonal = make_provisioner("z", requirements=[{"key": ZONE, "operator": "In", "values": ["us-west-2a"]}])
    world = World([zonal], catalog())
    pod = replace(builders.pod("v", cpu="1"), volume_terms=((Requirement(ZONE, "In", ("us-west-2c",)),),))
    found = explain(pod, world)
    v = verdict(found, "z")
    assert (v.rule, v.message) == (
        rules.VOLUME_ZONE,
        "the pod's volume is in topology.kubernetes.io/zone=us-west-2c; Provisioner z allows only us-west-2a",
    )
    remedy, _ = smallest_change(found, world)
    assert (
        remedy is not None
        and remedy.edit.description == "allow topology.kubernetes.io/zone us-west-2c in Provisioner z"
    )


def test_zone_spread_over_its_skew():
    """kube-scheduler PodTopologySpread (DoNotSchedule): the pool's only zone would exceed maxSkew."""
    zonal = make_provisioner("z", requirements=[{"key": ZONE, "operator": "In", "values": ["us-west-2a"]}])
    web = {"app": "web"}
    running = [replace(builders.pod(f"w{i}", cpu="1", labels=web), node_name="na") for i in range(2)]
    nodes = [
        unmanaged_node("na", zone="us-west-2a", pods=running),
        unmanaged_node("nb", zone="us-west-2b"),
        unmanaged_node("nc", zone="us-west-2c"),
    ]
    world = World([zonal], catalog(), existing_nodes=nodes)
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": ZONE,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": web},
        }
    ]
    found = explain(builders.pod("s", cpu="1", labels=web, topologySpreadConstraints=spread), world)
    v = verdict(found, "z")
    assert v.rule == rules.SPREAD, v.message
    remedy, _ = smallest_change(found, world)
    assert remedy is not None and remedy.edit.change == {"op": "scheduleAnyway", "index": 0}
