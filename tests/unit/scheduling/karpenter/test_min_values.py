"""Karpenter instance_selection_test.go Context("MinValues") (pkg/controllers/provisioning/scheduling)
on karpy's solve(), with NodePools loaded by karpy's NodePool loader.

Karpenter's fake types hold 1 cpu / 1Gi and 4 cpu / 4Gi and its pods ask 0.9 cpu / 0.9Gi, so the
small type holds one pod and the large one both. karpy subtracts kubelet and system overhead from
a type's capacity, so the types here are 2 cpu / 4Gi and 8 cpu / 16Gi and the pods ask 1.5 cpu /
1.5Gi: the same one-or-both. The custom numeric key `karpenter/numerical-value` of the Gt/Lt cases
is a label karpy's types cannot carry; the well-known karpenter.k8s.aws/instance-generation stands
in for it (the same numbers). `supportedInstanceTypes(CreateCalls[0])` is the node's options.
"""

from __future__ import annotations

from typing import Any

import pytest

from extender.api import labels as wk
from extender.api.nodepool import load_nodepool
from extender.api.provisioner import Provisioner
from extender.scheduling.instancetypes import GIB, InstanceType, Offering
from extender.scheduling.plan import PlannedNode
from tests.builders import nodepool_manifest, pod, req
from tests.unit.scheduling.builders import catalog
from tests.unit.scheduling.karpenter.builders import INSTANCE_TYPE, SPOT, Z1, Cluster

GEN = wk.INSTANCE_GENERATION


def nodepool(*requirements: dict[str, Any], name: str = "default", **limits: str) -> Provisioner:
    """A karpenter.sh/v1 NodePool (Karpenter's test.NodePool) through karpy's loader."""
    ref = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
    spec = {"nodeClassRef": ref, "requirements": list(requirements)}
    return load_nodepool(
        nodepool_manifest(name=name, template_spec=spec, **({"limits": limits} if limits else {}))
    )


def mv(requirement: dict[str, Any], count: int) -> dict[str, Any]:
    return {**requirement, "minValues": count}


def fake(name: str, cpu: int, price: float, *, arch: str = "arm64", **labels: str) -> InstanceType:
    """fake.NewInstanceType: one available spot offering in one zone."""
    return InstanceType.build(
        name=name,
        cpu=cpu,
        memory=cpu * 2 * GIB,
        arch=arch,
        max_pods=110,
        offerings=[Offering(Z1, SPOT, price)],
        type_labels=labels,
    )


SMALL, LARGE = "instance-type-1", "instance-type-2"


def _two_types(*, large_arch: str = "arm64") -> list[InstanceType]:
    return [fake(SMALL, 2, 0.52), fake(LARGE, 8, 1.0, arch=large_arch)]


def _pods(count: int = 2, **options: Any) -> list[Any]:
    return [pod(cpu="1.5", memory="1.5Gi", **options) for _ in range(count)]


def _apart_with_options(cluster: Cluster, batch: list[Any], least: int) -> list[PlannedNode]:
    plan = cluster.provision(batch)
    nodes = [cluster.expect_scheduled(p) for p in batch]
    assert nodes[0].name != nodes[1].name  # the two pods land on two nodes
    assert all(len(n.options) >= least for n in plan.nodes)
    return list(plan.nodes)


def test_instance_type_min_values_splits_the_pods():
    """Karpenter: "should schedule respecting the minValues from instance-type requirements"."""
    cluster = Cluster(nodepool(mv(req(INSTANCE_TYPE, "In", SMALL, LARGE), 2)), instance_types=_two_types())
    nodes = _apart_with_options(cluster, _pods(), 2)
    # Each node offers both types and costs the cheaper one (CreateFleet's lowest price).
    assert all({t.name for t in n.options} == {SMALL, LARGE} and n.price == 0.52 for n in nodes)


def test_without_min_values_the_pods_share_the_large_type():
    """The control of the case above: without minValues both pods fit (and go) on one large node."""
    cluster = Cluster(nodepool(req(INSTANCE_TYPE, "In", SMALL, LARGE)), instance_types=_two_types())
    batch = _pods()
    plan = cluster.provision(batch)
    assert len(plan.nodes) == 1 and [t.name for t in plan.nodes[0].options] == [LARGE]


def _generations(*gens: int) -> list[InstanceType]:
    sizes = {2: (2, 0.52), 3: (2, 1.0), 4: (8, 1.2), 5: (8, 1.2)}
    return [fake(f"instance-type-{i}", *sizes[g], **{GEN: str(g)}) for i, g in enumerate(gens, start=1)]


@pytest.mark.parametrize(
    ("requirement", "gens"),
    [
        # Karpenter: "should schedule respecting the minValues in Gt operator"
        (req(GEN, "Gt", "2"), (2, 3, 4)),
        # Karpenter: "should schedule respecting the minValues in Lt operator"
        (req(GEN, "Lt", "4"), (2, 3, 4)),
    ],
)
def test_min_values_on_gt_and_lt(requirement: dict[str, Any], gens: tuple[int, ...]):
    """Karpenter: "should schedule respecting the minValues in Gt operator" / "... in Lt operator"."""
    types = _generations(*gens)
    if requirement["operator"] == "Lt":
        # Lt 4 leaves generations 2 and 3; the large type is the one filtered out, so make it 2's.
        types = [
            fake("instance-type-1", 2, 0.52, **{GEN: "2"}),
            fake("instance-type-2", 8, 1.0, **{GEN: "3"}),
        ]
        types.append(fake("instance-type-3", 8, 1.2, **{GEN: "4"}))
    cluster = Cluster(nodepool(mv(requirement, 2)), instance_types=types)
    _apart_with_options(cluster, _pods(), 2)


@pytest.mark.parametrize(
    "pod_requirement",
    [
        # Karpenter: "scheduler should fail if the minValues in Gt operator is not satisfied"
        req(GEN, "Gt", "2"),
        # Karpenter: "scheduler should fail if the minValues in Lt operator is not satisfied"
        req(GEN, "Lt", "3"),
    ],
)
def test_pod_narrowing_below_min_values_is_unschedulable(pod_requirement: dict[str, Any]):
    """Karpenter: "scheduler should fail if the minValues in Gt/Lt operator is not satisfied": the
    NodePool asks two generations, each pod's own requirement leaves one; the reason names the key."""
    types = [fake("instance-type-1", 2, 0.52, **{GEN: "2"}), fake("instance-type-2", 8, 1.0, **{GEN: "3"})]
    cluster = Cluster(nodepool(mv(req(GEN, "Exists"), 2)), instance_types=types)
    batch = _pods(node_requirements=[pod_requirement])
    cluster.provision(batch)
    for p in batch:
        cluster.expect_not_scheduled(p)
        assert f"minValues requirement is not met for label(s) ({GEN})" in cluster.reason(p)


def test_max_of_in_and_not_in_min_values():
    """Karpenter: "should schedule considering the max of the minValues of In and NotIn operators in
    the instance-type requirements"."""
    types = [
        fake("instance-type-1", 2, 0.52),
        fake("instance-type-2", 4, 1.0),
        fake("instance-type-3", 8, 1.2),
    ]
    pool = nodepool(
        mv(req(INSTANCE_TYPE, "In", "instance-type-1", "instance-type-2", "instance-type-3"), 1),
        mv(req(INSTANCE_TYPE, "NotIn", "instance-type-3"), 2),
    )
    _apart_with_options(Cluster(pool, instance_types=types), _pods(), 2)


def test_max_of_gt_and_lt_min_values():
    """Karpenter: "should schedule considering the max of the minValues of Gt and Lt operators."."""
    pool = nodepool(mv(req(GEN, "Gt", "2"), 1), mv(req(GEN, "Lt", "5"), 2))
    _apart_with_options(Cluster(pool, instance_types=_generations(2, 3, 4, 5)), _pods(), 2)


def test_fails_when_fewer_types_than_min_values():
    """Karpenter: "schedule should fail if minimum number of InstanceTypes is not met as per the
    minValues in the requirement": ten types, minValues 11."""
    types = [t for t in catalog() if not t.burstable and not t.has_gpu][:10]
    cluster = Cluster(nodepool(mv(req(INSTANCE_TYPE, "Exists"), 11)), instance_types=types)
    (p,) = _pods(1)
    cluster.provision([p])
    cluster.expect_not_scheduled(p)
    assert f"minValues requirement is not met for label(s) ({INSTANCE_TYPE})" in cluster.reason(p)


def test_fails_when_truncation_cannot_keep_min_values():
    """Karpenter: "schedule should fail if minimum number of InstanceTypes is not met as per the
    minValues in the requirement after truncation" (MaxInstanceTypes 1 = karpy's max_options 1)."""
    cluster = Cluster(nodepool(mv(req(INSTANCE_TYPE, "In", SMALL, LARGE), 2)), instance_types=_two_types())
    batch = _pods()
    cluster.provision(batch, max_options=1)
    for p in batch:
        cluster.expect_not_scheduled(p)
        assert "minValues requirement is not met" in cluster.reason(p)


def test_max_of_exists_and_in_on_one_key():
    """Karpenter: "should schedule and pick the max of minValues of InstanceTypes if multiple operators
    are used for the same requirement."."""
    pool = nodepool(mv(req(INSTANCE_TYPE, "Exists"), 1), mv(req(INSTANCE_TYPE, "In", SMALL, LARGE), 2))
    _apart_with_options(Cluster(pool, instance_types=_two_types()), _pods(), 2)


def test_min_values_on_several_keys():
    """Karpenter: "should schedule and respect multiple requirement keys with minValues": two arches."""
    pool = nodepool(mv(req(wk.ARCH, "Exists"), 2), mv(req(INSTANCE_TYPE, "In", SMALL, LARGE), 1))
    nodes = _apart_with_options(Cluster(pool, instance_types=_two_types(large_arch="amd64")), _pods(), 2)
    assert all({t.arch for t in n.options} == {"arm64", "amd64"} for n in nodes)


def test_truncation_keeps_a_covering_set():
    """karpy, beyond Karpenter's Truncate (cheapest MaxInstanceTypes, an error when they break
    minValues): when the cheapest `max_options` types share a family, the options are the cheapest
    type, the cheapest of the other families needed, then the cheapest left; the price is unchanged."""
    family = wk.INSTANCE_FAMILY
    types = [fake(f"a{i}", 4, 0.1 * i, **{family: "a"}) for i in range(1, 6)]
    types += [fake("b1", 4, 1.0, **{family: "b"}), fake("c1", 4, 2.0, **{family: "c"})]
    cluster = Cluster(nodepool(mv(req(family, "Exists"), 3)), instance_types=types)
    (p,) = _pods(1)
    plan = cluster.provision([p], max_options=4)
    (node,) = plan.nodes
    assert [t.name for t in node.options] == ["a1", "a2", "b1", "c1"]
    assert node.price == pytest.approx(0.1)


def test_many_pods_each_node_keeps_its_min_values():
    """A batch packs onto nodes that twelve types still hold each (fixture catalog, amd64): smaller
    nodes than the same NodePool without minValues packs, each costing its cheapest option."""
    amd64 = req(wk.ARCH, "In", "amd64")

    def plan_for(*requirements: dict[str, Any]) -> Any:
        return Cluster(nodepool(*requirements)).provision([pod(cpu="3", memory="6Gi") for _ in range(40)])

    free = plan_for(req(INSTANCE_TYPE, "Exists"), amd64)
    plan = plan_for(mv(req(INSTANCE_TYPE, "Exists"), 12), amd64)
    assert not plan.unschedulable and len(plan.nodes) > len(free.nodes)
    assert min(len(n.options) for n in free.nodes) < 12
    for node in plan.nodes:
        assert len(node.options) >= 12
        assert node.price == pytest.approx(min(c.price for c in _prices(node)))


def _prices(node: PlannedNode) -> list[Offering]:
    return [
        o
        for t in node.options
        for o in t.offerings
        if o.available and o.zone in node.zones and o.capacity_type in node.capacity_types
    ]


@pytest.mark.parametrize(("least", "placed"), [(2, True), (3, False)])
def test_limits_that_shrink_the_options_below_min_values_drop_the_node(least: int, placed: bool):
    """Karpenter nodeclaim.go RemoveInstanceTypeOptionsByPriceAndMinValues: the options left within
    the NodePool's limits must still meet minValues. Limit 5 cpu keeps the 2- and 4-cpu types of three."""
    types = [fake(SMALL, 2, 0.52), fake(LARGE, 4, 1.0), fake("instance-type-3", 8, 1.2)]
    cluster = Cluster(nodepool(mv(req(INSTANCE_TYPE, "Exists"), least), cpu="5"), instance_types=types)
    (p,) = _pods(1)
    plan = cluster.provision([p])
    if placed:
        cluster.expect_scheduled(p)
        assert {SMALL, LARGE} <= {t.name for t in plan.nodes[0].options}
    else:
        cluster.expect_not_scheduled(p)
        assert f"minValues requirement is not met for label(s) ({INSTANCE_TYPE})" in cluster.reason(p)
