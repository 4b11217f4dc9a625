"""The solver and static NodePools / `limits.nodes` (plain data).

Sources: kubernetes-sigs/karpenter designs/nodepool-node-limits.md (a node counts 1 towards
`limits.nodes`, enforced in the simulated scheduling: no NodeClaim past it, a hard limit) and
pkg/controllers/static/provisioning (`GetStaticNodeClaimsToProvision`: a static pool's NodeClaims
carry the pool's requirements alone; static pools take no part in dynamic provisioning).
"""

from __future__ import annotations

from functools import partial

from extender.api import labels as wk
from extender.api.nodepool import load_nodepool
from extender.api.resources import NODES, Resources
from extender.cluster.inventory import usage
from extender.scheduling import limits
from extender.scheduling.solver import solve
from extender.scheduling.static import static_node
from tests import builders
from tests.builders import nodepool_manifest
from tests.model_builders import existing_node
from tests.unit.scheduling.builders import catalog, make_provisioner

#: Pods p0, p1... asking 3 CPU each.
pods = partial(builders.pods, prefix="p", cpu="3")


def test_limits_nodes_caps_the_new_nodes_of_a_dynamic_pool() -> None:
    prov = make_provisioner(
        limits={"resources": {"nodes": "2"}},
        requirements=[{"key": wk.INSTANCE_TYPE, "operator": "In", "values": ["m5.xlarge"]}],
    )
    plan = solve(pods(6), [prov], catalog())
    assert len(plan.nodes) == 2
    assert len(plan.unschedulable) == 4
    assert all("limits exceeded" in u.reason for u in plan.unschedulable)


def test_live_nodes_count_against_limits_nodes() -> None:
    prov = make_provisioner(limits={"resources": {"nodes": "3"}})
    plan = solve(pods(1), [prov], catalog(), usage={"default": Resources({NODES: 3})})
    assert not plan.nodes and "limits exceeded" in plan.unschedulable[0].reason
    plan = solve(pods(1), [prov], catalog(), usage={"default": Resources({NODES: 2})})
    assert len(plan.nodes) == 1


def test_usage_counts_each_node_once_towards_nodes() -> None:
    nodes = [
        builders.node(
            name,
            provisioner=None,
            instance=None,
            ready=None,
            labels={wk.NODEPOOL: pool},
            capacity={"cpu": "2"},
        )
        for name, pool in (("a", "x"), ("b", "x"), ("c", "y"))
    ]
    counted = usage(nodes)
    assert counted["x"].get(NODES) == 2 and counted["y"].get(NODES) == 1
    assert counted["x"].cpu == 4


def test_a_room_charges_one_node_whatever_the_type() -> None:
    room = limits.Room(("nodes",), Resources({NODES: 1}))
    small, big = catalog()[0], max(catalog(), key=lambda t: t.cpu)
    assert room.allows(small) and room.allows(big)
    assert room.charge(big) == Resources({NODES: 1})
    assert not (room - room.charge(big)).allows(small)


def test_the_solver_never_launches_for_a_static_pool() -> None:
    static = load_nodepool(nodepool_manifest(name="static", replicas=2))
    plan = solve(pods(2), [static], catalog())
    assert not plan.nodes and len(plan.unschedulable) == 2


def test_pods_fall_through_a_static_pool_to_a_dynamic_one() -> None:
    # The static pool weighs nothing (weight is refused on it) but comes first by name.
    static = load_nodepool(nodepool_manifest(name="a-static", replicas=2))
    dynamic = load_nodepool(nodepool_manifest(name="b-dynamic"))
    plan = solve(pods(2), [static, dynamic], catalog())
    assert plan.nodes and {n.provisioner for n in plan.nodes} == {"b-dynamic"}


def test_pending_pods_use_a_static_pools_existing_nodes() -> None:
    static = load_nodepool(nodepool_manifest(name="static", replicas=1))
    node = existing_node(
        "static-node",
        zone=None,
        hostname=False,
        provisioner="static",
        labels={wk.NODEPOOL: "static", wk.INSTANCE_TYPE: "m5.xlarge"},
        allocatable=Resources.parse({"cpu": "4", "memory": "16Gi", "pods": 58}),
    )
    plan = solve(pods(1), [static], catalog(), existing_nodes=[node])
    assert not plan.nodes and [p.name for p in plan.existing["static-node"]] == ["p0"]


def test_a_static_node_is_the_cheapest_type_the_requirements_allow() -> None:
    requirements = [
        {"key": wk.INSTANCE_TYPE, "operator": "In", "values": ["m5.2xlarge", "m5.xlarge", "c5.large"]},
        {"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
    ]
    static = load_nodepool(nodepool_manifest(name="static", replicas=1, requirements=requirements))
    planned = static_node(static, catalog())
    assert planned is not None and not planned.pods
    names = [t.name for t in planned.options]
    assert sorted(names) == ["c5.large", "m5.2xlarge", "m5.xlarge"]
    prices = [min(o.price for o in t.offerings if o.capacity_type == "on-demand") for t in planned.options]
    assert prices == sorted(prices) and planned.instance_type.name == "c5.large"
    assert planned.capacity_types == ("on-demand",)
    assert planned.labels[wk.NODEPOOL] == "static"


def test_a_static_pool_of_gpu_types_still_gets_nodes() -> None:
    """Accelerator types serve only pods asking for one (Karpenter 0.5 packable.go); a static pool
    asks for nodes, so its GPU-only requirements still give a node."""
    requirements = [{"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Exists"}]
    planned = static_node(
        load_nodepool(nodepool_manifest(name="gpu", replicas=1, requirements=requirements)), catalog()
    )
    assert planned is not None and all(t.has_gpu for t in planned.options)


def test_no_offering_left_gives_no_static_node() -> None:
    requirements = [{"key": wk.INSTANCE_TYPE, "operator": "In", "values": ["m5.xlarge"]}]
    static = load_nodepool(nodepool_manifest(name="static", replicas=1, requirements=requirements))
    m5 = next(t for t in catalog() if t.name == "m5.xlarge")
    refused = frozenset((m5.name, o.zone, o.capacity_type) for o in m5.offerings)
    assert static_node(static, catalog(), unavailable=refused) is None
