"""Pods kube-scheduler binds (Pod.deferred): karpy launches for them, holds their room on the node
and never binds them; the guard lets kube-scheduler place them there and keeps others off that
room; a bind, a delete or the deadline ends the hold."""

from __future__ import annotations

from typing import Any

import pytest

from extender.api.pod import Pod
from extender.api.resources import Resources
from extender.cloud.fake import FakeCloudProvider
from extender.cluster import inventory
from extender.cluster.boundpods import BoundPods
from extender.cluster.inventory import Bound, NodePods
from extender.http.guard import filter_nodes, prioritize
from extender.provisioning.controller import ProvisioningController
from extender.settings import Settings, from_env
from extender.state import ClusterState, NodeInfo
from tests.unit.provisioning.fakes import ZONE_A, ZONE_B, Clock, FakeCluster, pending_pod
from tests.unit.scheduling.builders import catalog

DRA = {"resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu-claim"}]}


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> tuple[FakeCluster, ProvisioningController, Clock]:
    cluster, clock = FakeCluster(monkeypatch), Clock()
    settings = Settings()
    settings.scheduler_bind_deadline_seconds = 60.0
    controller = ProvisioningController(
        settings=settings,
        kube=None,
        cloud=FakeCloudProvider(catalog=catalog()),
        state=ClusterState(),
        bound=BoundPods(),
        clock=clock,
    )
    return cluster, controller, clock


def run_batch(cluster: FakeCluster, controller: ProvisioningController, keys: list[str]) -> None:
    controller.provision(keys)
    controller.pools.drain()


def events(cluster: FakeCluster, name: str) -> list[tuple[str, str]]:
    return [(e["reason"], e["message"]) for e in cluster.events if e["kind"] == "Pod" and e["name"] == name]


def test_a_deferred_pod_gets_a_node_its_room_held_there_and_no_bind(world) -> None:
    cluster, controller, clock = world
    key = cluster.add_pod(pending_pod("dra", **DRA))
    plain = cluster.add_pod(pending_pod("plain"))
    run_batch(cluster, controller, [key, plain])
    hold = controller.state.held(key)
    assert hold is not None and hold.node in cluster.nodes and hold.until == clock.now + 60.0
    assert key not in cluster.bound and plain in cluster.bound
    assert events(cluster, "dra") == [
        (
            "Nominated",
            f"Pod should schedule on node {hold.node}, launched for it; kube-scheduler binds it (karpy "
            "does not evaluate spec.resourceClaims: dynamic resource allocation is not evaluated)",
        )
    ]
    assert controller.state.reservation(hold.node) == (1, Resources.of(cpu=1, memory=2**30))
    assert (controller.reports[-1].nominated, controller.reports[-1].bound) == (1, 1)


def test_the_deadline_is_a_setting() -> None:
    env = {"KARPY_SCHEDULER_BIND_DEADLINE_SECONDS": "42"}
    assert from_env(env).scheduler_bind_deadline_seconds == 42.0
    assert Settings().scheduler_bind_deadline_seconds == 300.0


def test_a_held_pod_is_not_launched_for_again_and_the_next_batch_plans_around_its_room(world) -> None:
    cluster, controller, _ = world
    key = cluster.add_pod(pending_pod("dra", **DRA))
    run_batch(cluster, controller, [key])
    nodes = set(cluster.nodes)
    run_batch(cluster, controller, [key])
    assert set(cluster.nodes) == nodes
    node = controller.state.held(key).node
    existing = {n.name: n for n in controller.pipeline.gather.inventory().existing}[node]
    assert [p.key for p in existing.pods] == [key] and existing.pod_count == 1
    assert existing.requested == Resources.of(cpu=1, memory=2**30)


def test_a_hold_on_a_node_that_is_gone_ends_and_the_pod_is_planned_again(world) -> None:
    cluster, controller, _ = world
    key = cluster.add_pod(pending_pod("dra", **DRA))
    run_batch(cluster, controller, [key])
    first = controller.state.held(key).node
    del cluster.nodes[first]
    controller.nodes.replace(list(cluster.nodes.values()), "2")
    run_batch(cluster, controller, [key])
    again = controller.state.held(key)
    assert again is not None and again.node != first and again.node in cluster.nodes


def test_the_pod_bound_or_deleted_ends_its_hold(world) -> None:
    cluster, controller, _ = world
    keys = [cluster.add_pod(pending_pod(name, **DRA)) for name in ("a", "b")]
    run_batch(cluster, controller, keys)
    node = controller.state.held(keys[0]).node
    bound = {**cluster.pods[keys[0]], "spec": {**cluster.pods[keys[0]]["spec"], "nodeName": node}}
    controller.bound.apply("ADDED", bound)
    controller.watcher.handle("DELETED", cluster.pods[keys[1]])
    assert controller.state.held(keys[0]) is None and controller.state.held(keys[1]) is None
    assert controller.state.reservation(node) == (0, Resources())


def test_the_deadline_ends_the_hold_with_an_event(world) -> None:
    cluster, controller, clock = world
    key = cluster.add_pod(pending_pod("dra", **DRA))
    run_batch(cluster, controller, [key])
    node = controller.state.held(key).node
    assert controller.nominations.next_in() == 60.0
    clock.now += 59
    assert controller.nominations.expire() == []
    clock.now += 1
    assert controller.nominations.expire() == [key]
    controller.pools.drain()
    assert events(cluster, "dra")[-1] == (
        "NotBoundByScheduler",
        f"kube-scheduler did not bind the pod within 60s, released the room reserved on node {node}",
    )
    assert controller.state.held(key) is None and controller.state.reservation(node) == (0, Resources())
    assert controller.nominations.next_in() is None


def test_a_deferred_pod_planned_onto_an_existing_node_is_held_there(world) -> None:
    cluster, controller, _ = world
    cluster.add_node("ours", ZONE_A, karpy=True)
    key = cluster.add_pod(pending_pod("dra", **DRA))
    run_batch(cluster, controller, [key])
    assert controller.state.held(key).node == "ours" and set(cluster.nodes) == {"ours"}
    assert events(cluster, "dra")[0][1].startswith("Pod should schedule on node ours; kube-scheduler")


def test_karpy_binds_nothing_into_room_held_on_a_node(world) -> None:
    """The re-check before a bind counts held pods: a 2-cpu node holding 1 cpu takes one 1-cpu pod."""
    cluster, controller, _ = world
    cluster.add_node("small", ZONE_B, karpy=True, cpu="2")
    state = controller.state
    state.hold("small", [Pod(namespace="ns", name="held", requests=Resources.of(cpu=1))], until=10_000)
    keys = [cluster.add_pod(pending_pod(name)) for name in ("x", "y")]
    run_batch(cluster, controller, keys)
    on_small = [k for k, node in cluster.bound.items() if node == "small"]
    assert len(on_small) <= 1 and len(cluster.bound) == 2


# --- the guard, on plain data --------------------------------------------------------------------


def manifest(name: str, cpu: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
    }


def guarded_state() -> ClusterState:
    state = ClusterState()
    state.set_nodes([NodeInfo(name="n1", provisioner="default", allocatable=Resources.of(cpu=4))])
    state.hold("n1", [Pod(namespace="ns", name="held", requests=Resources.of(cpu=3))], until=100.0)
    return state


def test_the_guard_lets_the_held_pod_onto_its_node_and_keeps_others_off_its_room() -> None:
    state = guarded_state()
    assert filter_nodes(state, manifest("held", "3"), ["n1", "n2"]).node_names == ["n1", "n2"]
    other = filter_nodes(state, manifest("other", "2"), ["n1", "n2"])
    assert other.node_names == ["n2"] and other.failed == {"n1": "karpy: room reserved for 1 other pod(s)"}
    assert filter_nodes(state, manifest("small", "1"), ["n1"]).node_names == ["n1"]


def test_the_guard_lets_a_held_pod_through_while_a_batch_has_it() -> None:
    state = guarded_state()
    state.claim(["ns/held", "ns/other"])
    assert filter_nodes(state, manifest("held", "3"), ["n1"]).node_names == ["n1"]
    assert filter_nodes(state, manifest("other", "1"), ["n1"]).claimed


def test_the_guard_lets_the_held_pod_onto_a_node_it_does_not_know_yet() -> None:
    state = ClusterState()
    state.hold("new", [Pod(namespace="ns", name="held", requests=Resources.of(cpu=3))], until=100.0)
    assert filter_nodes(state, manifest("held", "3"), ["new"]).node_names == ["new"]
    assert filter_nodes(state, manifest("other", "1"), ["new"]).node_names == []


def test_prioritize_prefers_the_node_holding_the_pods_room() -> None:
    state = guarded_state()
    state.mark_for_removal("n3", "empty")
    scores = {s["Host"]: s["Score"] for s in prioritize(state, ["n1", "n2", "n3"], manifest("held", "3"))}
    assert scores == {"n1": 10, "n2": 5, "n3": 0}
    others = {s["Host"]: s["Score"] for s in prioritize(state, ["n1", "n2", "n3"], manifest("other", "1"))}
    assert others == {"n1": 10, "n2": 10, "n3": 0}


# --- ClusterState holds ----------------------------------------------------------------------------


def test_a_hold_moves_with_its_pod_and_expires_at_its_deadline() -> None:
    state = ClusterState()
    held = Pod(namespace="ns", name="p", requests=Resources.of(cpu=1))
    state.hold("a", [held], until=10.0)
    state.hold("b", [held], until=20.0)
    assert state.reservation("a") == (0, Resources()) and state.reservation("b")[0] == 1
    assert state.next_expiry() == 20.0 and state.expire(19.0) == []
    assert [h.node for h in state.expire(20.0)] == ["b"] and state.reserved_nodes() == frozenset()


def test_held_pods_count_on_their_node_until_the_index_has_them_bound() -> None:
    held = Pod(namespace="ns", name="p", requests=Resources.of(cpu=1))
    on_node = NodePods((), 0, Resources())
    assert inventory.with_held(on_node, [held], frozenset()).count == 1
    assert inventory.with_held(on_node, [held], Bound(keys=frozenset({"ns/p"})).keys) is on_node


def test_a_held_pod_is_nominated_to_its_node_again_when_kube_scheduler_clears_it_and_cleared_at_the_deadline(
    world,
) -> None:
    """The hold is told to kube-scheduler as `status.nominatedNodeName` (its nominator counts the
    room; KEP-5278). kube-scheduler clears the field after a failed attempt with no preemption
    candidate (schedule_one.go, preemption.go `NewPostFilterResultWithNominatedNode("")`), so the
    pending watch sets it again while the hold lasts; the deadline clears it."""
    cluster, controller, clock = world
    key = cluster.add_pod(pending_pod("dra", **DRA))
    run_batch(cluster, controller, [key])
    node = controller.state.held(key).node
    assert cluster.nominated == {key: node}
    cleared = {**cluster.pods[key], "status": {**cluster.pods[key]["status"], "nominatedNodeName": None}}
    cluster.nominated.clear()
    controller.watcher.handle("MODIFIED", cleared)
    assert cluster.nominated == {key: node}
    cluster.nominated.clear()
    controller.watcher.handle("MODIFIED", cluster.pods[key])  # already nominated there: no write
    assert cluster.nominated == {}
    clock.now += 60
    assert controller.nominations.expire() == [key]
    assert cluster.nominated == {key: None}
    controller.watcher.handle("MODIFIED", cleared)  # no hold left: not nominated again
    assert cluster.nominated == {key: None}
