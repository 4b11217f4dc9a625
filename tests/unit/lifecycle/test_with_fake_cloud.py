"""The lifecycle's decisions that reach the cloud, driven against the in-memory CloudProvider:
garbage collection both ways, crash recovery handing instances to provisioning for adoption, and
expiry launching replacements through provisioning (re-planned after a capacity error)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest

from extender.api import labels as wk
from extender.api.node import Node
from extender.api.pod import Pod
from extender.cloud.fake import FakeCloudProvider
from extender.cloud.types import InstanceNotFoundError, InsufficientCapacityError, LaunchRequest, OfferingKey
from extender.cluster.boundpods import BoundPods
from extender.lifecycle import expiry, gc, nodepatch, recovery
from extender.lifecycle.context import Context
from extender.lifecycle.events import Recorder
from extender.provisioning.controller import ProvisioningController
from extender.settings import Settings
from extender.state import ClusterState
from tests.builders import T0, node, stamp
from tests.unit.provisioning.fakes import ZONE_A, FakeCluster, pending_pod
from tests.unit.scheduling.builders import catalog, make_provisioner

GRACE = Settings().lifecycle.gc_grace_seconds


def launch(cloud: FakeCloudProvider, count: int = 1, *, at: datetime = T0) -> list[str]:
    """Instances as an interrupted launch leaves them: tagged, running, without a Node."""
    request = LaunchRequest(
        provisioner=make_provisioner("default"),
        instance_types=("m5.large",),
        zones=("us-west-2a",),
        capacity_types=("on-demand",),
        count=count,
        labels={},
        taints=(),
        launch_id="launch-1",
    )
    result = cloud.create(request)
    for instance in result.instances:  # launched at `at`, so the grace is measured from there
        cloud.instances[instance.id] = replace(instance, launch_time=at)
    return [i.id for i in result.instances]


def read(manifest: dict[str, Any] | None) -> Node | None:
    return None if manifest is None else Node.from_live(manifest)


class World:
    def __init__(self, monkeypatch: pytest.MonkeyPatch, *, leader: bool = True) -> None:
        self.cloud = FakeCloudProvider(catalog=catalog())
        self.nodes: list[Node] = []
        self.deleted: list[str] = []
        self.state = ClusterState()
        self.now = T0
        monkeypatch.setattr(gc, "list_karpy_nodes", lambda _: list(self.nodes))
        monkeypatch.setattr(gc.nodeclaims, "list_claims", lambda _: [])
        monkeypatch.setattr(gc.nodepatch, "delete_node", lambda _, name: self.deleted.append(name))
        self.ctx = Context(
            settings=Settings(),
            kube=None,
            cloud=self.cloud,
            state=self.state,
            provisioning=None,
            recorder=Recorder(None),
            is_leader=lambda: leader,
            clock=lambda: self.now,
        )


def test_gc_terminates_an_instance_without_a_node_only_after_the_grace(monkeypatch) -> None:
    world = World(monkeypatch)
    (orphan,) = launch(world.cloud)
    world.now = T0 + timedelta(seconds=GRACE - 1)
    assert gc.collect(world.ctx).instances == ()
    assert "delete" not in world.cloud.verbs()
    world.now = T0 + timedelta(seconds=GRACE + 1)
    gc.collect(world.ctx)
    assert [c.args for c in world.cloud.calls if c.verb == "delete"] == [(orphan,)]
    assert world.cloud.list() == []


def test_gc_spares_instances_with_a_node_and_protected_ones(monkeypatch) -> None:
    world = World(monkeypatch)
    with_node, protected = launch(world.cloud, 2)
    world.nodes = [node("n1", instance=with_node)]
    world.now = T0 + timedelta(seconds=GRACE * 10)
    gc.collect(world.ctx, protected=frozenset({protected}))
    assert "delete" not in world.cloud.verbs()


def test_gc_goes_on_when_the_cloud_no_longer_knows_an_instance(monkeypatch) -> None:
    world = World(monkeypatch)
    first, second = launch(world.cloud, 2)
    world.cloud.fail_next("delete", InstanceNotFoundError(f"instance {first} not found"))
    world.now = T0 + timedelta(seconds=GRACE + 1)
    gc.collect(world.ctx)
    assert [c.args[0] for c in world.cloud.calls if c.verb == "delete"] == [first, second]


def test_gc_marks_and_deletes_a_node_whose_instance_is_gone(monkeypatch) -> None:
    world = World(monkeypatch)
    world.nodes = [node("gone", instance="i-9999")]
    world.now = T0 + timedelta(seconds=GRACE + 1)
    assert gc.collect(world.ctx).nodes == ("gone",)
    assert world.deleted == ["gone"] and world.state.removal_reason("gone") == "instance gone"


def test_a_follower_collects_nothing(monkeypatch) -> None:
    world = World(monkeypatch, leader=False)
    launch(world.cloud)
    world.nodes = [node("gone", instance="i-9999")]
    world.now = T0 + timedelta(seconds=GRACE + 1)
    gc.collect(world.ctx)
    assert "delete" not in world.cloud.verbs() and world.deleted == []


def test_recovery_hands_the_instances_of_an_interrupted_launch_to_provisioning(monkeypatch) -> None:
    cluster = FakeCluster(monkeypatch)
    world = World(monkeypatch)
    (instance,) = launch(world.cloud)
    world.ctx.provisioning = ProvisioningController(
        settings=Settings(),
        kube=None,  # type: ignore[arg-type]
        cloud=world.cloud,
        state=world.state,
        bound=BoundPods(),
    )
    adopted = recovery.recover(world.ctx)
    assert adopted == list(cluster.nodes)
    (created,) = cluster.nodes.values()
    assert created["spec"]["providerID"].endswith(instance)
    assert created["metadata"]["labels"][wk.PROVISIONER_NAME] == "default"
    # Adopted once: the next recovery finds the Node and leaves the instance alone.
    assert recovery.recover(world.ctx) == [] and len(cluster.nodes) == 1


def refuse_cheapest(request: LaunchRequest) -> InsufficientCapacityError:
    cheapest = request.instance_types[0]
    return InsufficientCapacityError(
        "InsufficientInstanceCapacity",
        offerings=[OfferingKey(cheapest, z, c) for z in request.zones for c in request.capacity_types],
    )


def test_an_expired_node_is_replaced_through_provisioning_before_it_is_deleted(monkeypatch) -> None:
    cluster = FakeCluster(monkeypatch)
    world = World(monkeypatch)
    cluster.add_node("old", ZONE_A, karpy=True)
    old = cluster.nodes["old"]
    old["metadata"]["creationTimestamp"] = stamp(T0)
    owner = [{"kind": "ReplicaSet", "name": "web", "apiVersion": "apps/v1", "uid": "rs"}]
    workload = []
    for name in ("web-1", "web-2"):
        manifest = pending_pod(name, node_name="old", phase="Running")
        manifest["metadata"]["ownerReferences"] = owner
        cluster.add_pod(manifest)
        workload.append(Pod.from_live(manifest))
    cordoned: list[str] = []
    monkeypatch.setattr(expiry, "cordon", lambda _, name: cordoned.append(name) or True)
    monkeypatch.setattr(nodepatch, "get_node", lambda _, name: read(cluster.nodes.get(name)))
    monkeypatch.setattr(nodepatch, "pods_on_node", lambda _, name: workload if name == "old" else [])
    world.cloud.fail_next("create", refuse_cheapest)
    world.ctx.provisioning = provisioning = ProvisioningController(
        settings=Settings(),
        kube=None,  # type: ignore[arg-type]
        cloud=world.cloud,
        state=world.state,
        bound=BoundPods(),
    )
    world.now = T0 + timedelta(hours=2)
    ttl = 3600.0
    due = [("old", T0 + timedelta(seconds=ttl))]
    keeper = expiry.Expiry()

    def reconcile() -> float | None:
        return keeper.reconcile(world.ctx, Node.from_live(old), ttl, pods=workload, deleting=set(), due=due)

    assert reconcile() == expiry.WAIT_POLL_SECONDS
    failed, launched = world.cloud.requests
    assert failed.instance_types[0] not in launched.instance_types
    assert {k.instance_type for k in provisioning.unavailable} == {failed.instance_types[0]}
    # One node or two smaller ones, whichever the re-plan without the refused type finds cheaper.
    replacements = [n for n in cluster.nodes if n != "old"]
    assert replacements and cordoned == ["old"]
    assert world.state.removal_reason("old") == "expired" and cluster.bound == {}
    # The old node goes only once every replacement is initialized: Ready, and its not-ready taint
    # lifted (Karpenter waits for Initialized replacements, issue 31).
    assert world.deleted == []
    ready = [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]
    for name in replacements:
        cluster.nodes[name]["status"]["conditions"] = ready
    assert reconcile() == expiry.WAIT_POLL_SECONDS and world.deleted == []
    for name in replacements[:-1]:
        cluster.nodes[name]["spec"]["taints"] = []
        assert reconcile() == expiry.WAIT_POLL_SECONDS and world.deleted == []
    cluster.nodes[replacements[-1]]["spec"]["taints"] = []
    assert reconcile() is None and world.deleted == ["old"]
