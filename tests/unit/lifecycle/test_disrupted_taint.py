"""The removal mark and the `karpy.sh/disrupted:NoSchedule` taint go together (lifecycle/context.py),
as Karpenter v1 taints `karpenter.sh/disrupted:NoSchedule` on the nodes it disrupts and removes the
taint from nodes it is not disrupting (pkg/controllers/disruption: "Idempotently remove this taint
from candidates that are not in the orchestration queue"). Plain data: the patches are counted by
the conftest's `node_taints`; tests/integration/test_disrupted_taint.py sends them for real."""

from __future__ import annotations

from typing import Any

import pytest

from extender.api import labels
from extender.lifecycle import nodepatch
from extender.state import ClusterState
from tests.builders import node
from tests.unit.lifecycle.builders import context

KEY = labels.DISRUPTED_TAINT_KEY


def test_marking_taints_once_and_unmarking_removes_the_taint(node_taints: dict[str, set[str]]) -> None:
    state = ClusterState()
    ctx = context(state)
    ctx.mark("n1", "empty")
    assert state.marked() == {"n1": "empty"} and node_taints == {"n1": {KEY}}
    node_taints["n1"].clear()
    # Marked already (termination marks on every reconcile): no second patch.
    ctx.mark("n1", "terminating")
    assert state.removal_reason("n1") == "terminating" and node_taints["n1"] == set()
    node_taints["n1"].add(KEY)
    ctx.unmark("n1")
    assert state.marked() == {} and node_taints["n1"] == set()


def test_a_taint_that_fails_leaves_the_node_unmarked_for_the_retry(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(_kube: Any, _name: str, _taint: Any) -> bool:
        raise RuntimeError("apiserver away")

    monkeypatch.setattr(nodepatch, "add_taint", refused)
    state = ClusterState()
    with pytest.raises(RuntimeError):
        context(state).mark("n1", "drifted")
    assert state.marked() == {}


def test_a_taint_without_a_mark_is_removed_and_a_marked_or_deleting_node_keeps_it(
    node_taints: dict[str, set[str]],
) -> None:
    state = ClusterState()
    ctx = context(state)
    tainted = [{"key": KEY, "effect": "NoSchedule"}]
    node_taints.update({"stale": {KEY}, "marked": {KEY}, "deleting": {KEY}})
    state.mark_for_removal("marked", "empty")
    ctx.release_stale_taint(node("stale", taints=tainted))
    ctx.release_stale_taint(node("marked", taints=tainted))
    ctx.release_stale_taint(node("deleting", taints=tainted, deleting=True))
    assert node_taints == {"stale": set(), "marked": {KEY}, "deleting": {KEY}}


def test_without_state_nothing_is_marked_or_tainted(node_taints: dict[str, set[str]]) -> None:
    ctx = context(None)
    ctx.mark("n1", "empty")
    ctx.release_stale_taint(node("n1", taints=[{"key": KEY, "effect": "NoSchedule"}]))
    assert node_taints == {}
