"""The static NodePool decision (extender/provisioning/static.py `decide`), plain data.

Ported from kubernetes-sigs/karpenter pkg/controllers/static: provisioning/controller.go launches
`replicas - nodes`, capped by what `limits.nodes` leaves (ComputeNodeClaimsToProvision);
deprovisioning/controller.go removes `running - replicas`, choosing empty nodes first (no pods but
DaemonSet pods, no do-not-disrupt), then nodes without do-not-disrupt pods, then the higher
`karpenter.sh/deprovisioning-priority`, then the lower disruption cost.
"""

from __future__ import annotations

from typing import Any

from extender.api.node import Node
from extender.api.nodepool import load_nodepool
from extender.provisioning.static import Decision, Member, decide, launch_id, member
from tests import builders
from tests.builders import nodepool_manifest


def static(replicas: int, **spec: Any):
    return load_nodepool(nodepool_manifest(name="s", replicas=replicas, **spec))


def members(*names: str, **pods: int) -> list[Member]:
    return [Member(n, pods=pods.get(n, 0)) for n in names]


def test_missing_replicas_are_launched() -> None:
    assert decide(static(3), [], 0) == Decision(launch=3)
    assert decide(static(3), members("a"), 1) == Decision(launch=2)
    assert decide(static(2), members("a", "b"), 2) == Decision()
    assert decide(static(0), [], 0) == Decision()


def test_a_node_being_replaced_does_not_count_but_stays_under_the_node_limit() -> None:
    # "a" is deleting (drift, expiry): 1 active of 2 wanted, 2 nodes in all.
    assert decide(static(2), members("b"), 2) == Decision(launch=1)
    # At limits.nodes 2 the replacement waits for the deleting node to go (a hard limit).
    assert decide(static(2, limits={"nodes": "2"}), members("b"), 2) == Decision()
    assert decide(static(5, limits={"nodes": "3"}), [], 0) == Decision(launch=3)


def test_surplus_removes_empty_nodes_first() -> None:
    pods = {"a": 3, "b": 0, "c": 1, "d": 0}
    assert decide(static(2), members("a", "b", "c", "d", **pods), 4) == Decision(remove=("b", "d"))
    assert decide(static(1), members("a", "b", "c", "d", **pods), 4) == Decision(remove=("b", "d", "c"))


def test_do_not_disrupt_nodes_go_last_and_priority_before_pod_count() -> None:
    nodes = [
        Member("protected", pods=1, do_not_disrupt=True),
        Member("busy", pods=5, priority=10),
        Member("light", pods=1),
    ]
    assert decide(static(2), nodes, 3) == Decision(remove=("busy",))
    assert decide(static(1), nodes, 3) == Decision(remove=("busy", "light"))
    assert decide(static(0), nodes, 3).remove[-1] == "protected"


def test_a_member_counts_workload_pods_and_reads_protection_and_priority() -> None:
    node = Node.from_manifest(
        {"metadata": {"name": "n", "annotations": {"karpenter.sh/deprovisioning-priority": "7"}}}
    )
    daemon = builders.pod("ds", uid="", owner_kind="DaemonSet", owner_name="o")
    assert member(node, [daemon]) == Member("n", pods=0, priority=7)
    assert member(node, [daemon]).empty
    guarded = builders.pod(
        "w",
        uid="",
        owner_kind="ReplicaSet",
        owner_name="o",
        annotations={"karpenter.sh/do-not-disrupt": "true"},
    )
    found = member(node, [daemon, guarded])
    assert found.pods == 1 and found.do_not_disrupt and not found.empty
    odd = Node.from_manifest(
        {"metadata": {"name": "n", "annotations": {"karpenter.sh/deprovisioning-priority": "x"}}}
    )
    assert member(odd, []).priority == 0


def test_launch_ids_change_with_the_nodes_and_the_pool_version() -> None:
    pool_a = static(2)
    first = launch_id(pool_a, ["a"], 1)
    assert first == launch_id(pool_a, ["a"], 1) and len(first) == 32
    assert first != launch_id(pool_a, ["a", "b"], 1)
    assert first != launch_id(pool_a, ["a"], 2)
