"""Garbage collection of NodeClaims (lifecycle/gc.py orphan_claims), on plain data: a claim goes
only when its node and its instance are both gone, and not before the grace."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from extender.api.nodeclaim import Record
from extender.cloud.types import Instance
from extender.cluster.errors import Unavailable
from extender.lifecycle import gc
from tests.builders import T0, node

from .test_with_fake_cloud import GRACE, World

OLD = T0 - timedelta(minutes=10)


def claim(name: str, instance: str, node_name: str, created: datetime = OLD) -> Record:
    return Record(name, f"aws:///us-west-2a/{instance}", node_name, created)


def instance(iid: str) -> Instance:
    return Instance(iid, "m5.large", "us-west-2a", "spot", "", f"aws:///us-west-2a/{iid}", "running")


def test_a_claim_goes_only_when_node_and_instance_are_both_gone() -> None:
    claims = [
        claim("both-gone", "i-1", "n1"),
        claim("node-left", "i-2", "n2"),  # instance gone, node still there
        claim("instance-left", "i-3", "n3"),  # node gone, instance running: the orphan-instance GC's first
        claim("renamed-node", "i-4", "other"),  # the node that holds its instance has another name
        claim("young", "i-5", "n5", created=T0 - timedelta(seconds=30)),
        claim("never-launched", "", "", created=OLD),
    ]
    # A node that is not an EC2 instance does not hold a claim without a provider id.
    nodes = [node("n2", instance="i-2"), node("n4", instance="i-4"), node("kind", instance="")]
    found = gc.orphan_claims(claims, nodes, [instance("i-3")], T0, 120)
    assert found == ("both-gone", "never-launched")


def test_a_claim_being_deleted_whose_node_and_instance_are_gone_goes_without_the_grace() -> None:
    # `kubectl delete nodeclaim` of a claim whose launch never wrote a Node: nothing left to wait for.
    young = T0 - timedelta(seconds=5)
    deleting = Record("deleting", "aws:///us-west-2a/i-1", "n1", young, deleting=True, finalized=True)
    held = Record("held", "aws:///us-west-2a/i-2", "n2", young, deleting=True, finalized=True)
    assert gc.orphan_claims([deleting, held], [], [instance("i-2")], T0, 120) == ("deleting",)


def test_no_claims_no_garbage() -> None:
    assert gc.orphan_claims([], [node("n1")], [], T0, 120) == ()


def test_claims_that_cannot_be_listed_do_not_stop_the_collection(monkeypatch: pytest.MonkeyPatch) -> None:
    world = World(monkeypatch)

    def unlisted(_: object) -> list[dict[str, object]]:
        raise Unavailable("listing nodeclaims: connection refused")

    monkeypatch.setattr(gc.nodeclaims, "list_claims", unlisted)
    world.nodes = [node("gone", instance="i-9999")]
    world.now = T0 + timedelta(seconds=GRACE + 1)
    garbage = gc.collect(world.ctx)
    assert garbage.nodes == ("gone",) and garbage.claims == ()
    assert world.deleted == ["gone"]


def test_orphan_claims_are_deleted_by_a_leader_only(monkeypatch: pytest.MonkeyPatch) -> None:
    orphan = {
        "metadata": {"name": "general-0dead", "creationTimestamp": "2026-01-01T11:00:00Z"},
        "status": {"providerID": "aws:///us-west-2a/i-0dead", "nodeName": "gone"},
    }
    deleted: list[str] = []
    # Deleted and its finalizer lifted at once (`remove`), or the claim would be held for ever.
    monkeypatch.setattr(gc.nodeclaims, "remove", lambda _, name: deleted.append(name) or True)
    for leader, expected in ((False, []), (True, ["general-0dead"])):
        world = World(monkeypatch, leader=leader)
        monkeypatch.setattr(gc.nodeclaims, "list_claims", lambda _: [orphan])
        world.now = T0 + timedelta(seconds=GRACE + 1)
        assert gc.collect(world.ctx).claims == ("general-0dead",)
        assert deleted == expected
