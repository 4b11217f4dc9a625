"""Emptiness and the room provisioning holds for pods kube-scheduler binds: a node holding such
room is not empty yet; once the hold ends (bound, deleted, deadline) the normal TTL path applies."""

from __future__ import annotations

from datetime import timedelta

import pytest

from extender.api import labels
from extender.api.pod import Pod
from extender.api.resources import Resources
from extender.lifecycle import emptiness
from extender.state import ClusterState
from tests.builders import T0, node, stamp
from tests.unit.lifecycle.builders import context


def test_a_due_empty_node_holding_room_is_kept_until_the_hold_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    deleted: list[str] = []
    monkeypatch.setattr(emptiness.nodepatch, "pods_on_node", lambda _kube, _node: [])
    monkeypatch.setattr(emptiness.nodepatch, "delete_node", lambda _kube, name: deleted.append(name))
    state = ClusterState()
    state.hold("n1", [Pod(namespace="ns", name="claim-user", requests=Resources.of(cpu=1))], until=100.0)
    ctx = context(state)
    ctx.clock = lambda: T0 + timedelta(seconds=60)
    due = node(annotations={labels.EMPTINESS_TIMESTAMP_ANNOTATION: stamp(T0)})
    assert emptiness.reconcile(ctx, due, [], 30) == emptiness.HOLD_POLL_SECONDS
    assert deleted == [] and state.marked() == {}
    state.expire(100.0)
    emptiness.reconcile(ctx, due, [], 30)
    assert deleted == ["n1"]
