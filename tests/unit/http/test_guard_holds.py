"""Issue 33: the guard never refuses a pod the room held for it, and a hold under the pod's name for
a pod that no longer exists ends. (A StatefulSet on a WaitForFirstConsumer class: karpy holds the
room of the replicas it planned on one new node, kube-scheduler binds them; its filter was refused
"room reserved for 1 other pod(s)" on that node for ever, each replica for the other's hold.)"""

from __future__ import annotations

from typing import Any

from extender.api.pod import Pod
from extender.api.resources import Resources
from extender.http.guard import filter_nodes, prioritize
from extender.state import ClusterState, NodeInfo


def manifest(name: str, cpu: str, uid: str = "") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": uid or f"uid-{name}"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
    }


def held(name: str, cpu: float, uid: str = "") -> Pod:
    return Pod(namespace="ns", name=name, uid=uid or f"uid-{name}", requests=Resources.of(cpu=cpu))


def test_pods_held_together_on_a_new_node_are_each_let_onto_it() -> None:
    """Two replicas planned on one node the node cache does not list yet (it is rebuilt by the next
    batch): each is let on, though the other's room is held there too; other pods are kept off."""
    state = ClusterState()
    state.hold("new", [held("db-0", 1), held("db-1", 1)], until=100.0)
    for name in ("db-0", "db-1"):
        result = filter_nodes(state, manifest(name, "1"), ["new", "cordoned"])
        assert result.node_names == ["new", "cordoned"] and not result.failed, name
    other = filter_nodes(state, manifest("other", "1"), ["new"])
    assert other.failed == {"new": "karpy: room reserved for 2 other pod(s)"}


def test_a_held_pod_is_let_onto_its_node_whatever_the_cached_room_says() -> None:
    """The cache counts what was bound when karpy last looked: a node full on paper still takes the
    pods whose room the plan kept there (kube-scheduler's own NodeResourcesFit has the last word)."""
    state = ClusterState()
    # db-0 is bound and counted in `requested`; its hold ends when the bound-pod index hears of it.
    node = NodeInfo(
        name="n1", provisioner="p", allocatable=Resources.of(cpu=2), requested=Resources.of(cpu=1)
    )
    state.set_nodes([node])
    state.hold("n1", [held("db-0", 1), held("db-1", 1)], until=100.0)
    assert filter_nodes(state, manifest("db-1", "1"), ["n1"]).node_names == ["n1"]
    state.hold("n2", [held("db-2", 1)], until=100.0)
    # Held elsewhere: n1's room is the others'.
    assert filter_nodes(state, manifest("db-2", "1"), ["n1", "n2"]).node_names == ["n2"]


def test_a_hold_for_an_earlier_pod_of_the_same_name_ends_when_the_new_pod_comes() -> None:
    """A StatefulSet re-creates a pod under its name with a new uid: the old pod's hold is released
    (its room and its place in the guard), and the new pod is karpy's to plan again."""
    state = ClusterState()
    state.hold("n1", [held("db-0", 1, uid="old"), held("db-1", 1)], until=100.0)
    state.claim(["ns/db-0"])
    result = filter_nodes(state, manifest("db-0", "1", uid="new"), ["n1"])
    assert result.claimed and state.held("ns/db-0") is None
    assert state.reservation("n1") == (1, Resources.of(cpu=1))
    scores = prioritize(state, ["n1", "n2"], manifest("db-0", "1", uid="new"))
    assert {s["Host"]: s["Score"] for s in scores} == {"n1": 10, "n2": 10}


def test_the_same_pod_keeps_its_hold() -> None:
    state = ClusterState()
    state.hold("n1", [held("db-0", 1)], until=100.0)
    assert filter_nodes(state, manifest("db-0", "1"), ["n1"]).node_names == ["n1"]
    assert state.held("ns/db-0") is not None
    # kube-scheduler always sends the uid; a manifest without one is not taken for another pod.
    assert filter_nodes(
        state, {**manifest("db-0", "1"), "metadata": {"name": "db-0", "namespace": "ns"}}, ["n1"]
    ).node_names == ["n1"]
    assert state.held("ns/db-0") is not None
