"""Issue 31: values admitted before admission refused them (or with the webhook out of the path)
never crash or stall a lifecycle worker, and one node karpy cannot handle stops no other.

`99999999999h` is a duration the NodePool CRD's pattern admits; `created + that` is past
datetime.max, which raised OverflowError in expires_at, deadline_of and the budget window. The
clamp (extender/lifecycle/horizon.py): such a deadline is "never".
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from extender.api import cron, labels
from extender.api.disruption import Budget
from extender.api.provisioner import Provisioner
from extender.lifecycle import budgets, emptiness, horizon
from extender.lifecycle.expiry import expires_at
from extender.lifecycle.termination import deadline_of, needs_force_delete
from tests.builders import T0, node, node_manifest, running_pod, stamp
from tests.unit.lifecycle.plainworld import PlainWorld

HUGE = 99999999999 * 3600  # 99999999999h, as nodepool.duration_seconds reads it


def pool_node(name: str, pool: str, **kwargs: Any) -> dict[str, Any]:
    manifest = node_manifest(name, provisioner=None, instance=f"i-{name}", **kwargs)
    manifest["metadata"]["labels"][labels.NODEPOOL] = pool
    return manifest


def test_a_deadline_past_the_calendar_is_never() -> None:
    assert horizon.after(T0, HUGE) is None
    assert horizon.after(T0, float("inf")) is None and horizon.after(T0, float("nan")) is None
    assert horizon.after(T0, 60) == T0 + timedelta(minutes=1)


def test_expiry_and_the_termination_deadline_of_a_huge_duration_are_never() -> None:
    assert expires_at(node("n1"), HUGE) is None
    deleting = node("n1", deleting=True)
    assert deadline_of(deleting, HUGE) is None
    assert deadline_of(deleting, 60) == T0 + timedelta(seconds=60)


def test_a_pod_grace_longer_than_the_calendar_is_deleted_by_the_deadline() -> None:
    """Karpenter's needsForceDelete: due at deadline - the pod's grace; a grace past the calendar
    is due at once."""
    victim = replace(running_pod("p1"), grace_seconds=2**62)
    assert needs_force_delete(victim, T0 + timedelta(hours=1), T0)


def test_an_emptiness_ttl_past_the_calendar_never_runs_out() -> None:
    empty = node("n1", annotations={labels.EMPTINESS_TIMESTAMP_ANNOTATION: stamp(T0)})
    decision = emptiness.decide(empty, [], HUGE, T0 + timedelta(days=365))
    assert decision.action is emptiness.Action.NONE and decision.requeue_after is None


def test_a_budget_window_longer_than_the_calendar_is_open() -> None:
    """Budget.IsActive: the next fire after now - duration is not after now; with now - duration
    before year 1 every fire there has been qualifies, so the window is open and its nodes apply."""
    budget = Budget(nodes="0", schedule="0 0 * * *", duration=HUGE)
    assert budgets.budget_allows(budget, 10, T0) == 0
    with pytest.raises(OverflowError):  # what the clamp is for
        cron.window_open(cron.parse("0 0 * * *"), HUGE, T0)


@pytest.mark.parametrize(
    ("value", "total", "expected"),
    [
        ("9" * 5000, 10, budgets.UNLIMITED),
        ("9" * 5000 + "%", 10, 10),
        ("250%", 4, 4),
        ("three", 10, 0),
        ("", 10, 0),
        ("99999999999", 10, budgets.UNLIMITED),
    ],
)
def test_absurd_budget_nodes_are_clamped_not_raised(value: str, total: int, expected: int) -> None:
    assert budgets.allowed(value, total) == expected


def test_a_schedule_field_int_refuses_fails_closed() -> None:
    budget = Budget(nodes="5", schedule="1" * 5000 + " * * * *", duration=60)
    assert budgets.budget_allows(budget, 10, T0) == 0


def test_a_huge_expire_after_pool_neither_stalls_its_nodes_nor_the_others(monkeypatch) -> None:
    """The issue's case: with a node of a huge-expireAfter pool in the cache, `_due` raised for
    every node of every pool; a deleted node of that pool kept its finalizer and an emptied node of
    another pool was never removed."""
    pools = {
        "huge": Provisioner(
            name="huge",
            kind="NodePool",
            ttl_seconds_until_expired=HUGE,
            termination_grace_period=HUGE,
            ttl_seconds_after_empty=HUGE,
        ),
        "plain": Provisioner(name="plain", kind="NodePool", ttl_seconds_after_empty=30),
    }
    world = PlainWorld(monkeypatch, pools)
    world.add(pool_node("big", "huge"))
    gone = world.add(pool_node("big-deleted", "huge", deleting=True))
    empty = world.add(
        pool_node("small", "plain", annotations={labels.EMPTINESS_TIMESTAMP_ANNOTATION: stamp(T0)})
    )
    world.now = T0 + timedelta(minutes=5)
    assert [name for name, _ in world.worker._due()] == []
    world.reconcile_all()
    assert world.worker.faults.names() == set()
    assert gone in world.released  # the termination finalizer came off
    assert world.deleted == [empty]  # the emptied node of the other pool went


def test_a_node_karpy_cannot_handle_is_skipped_and_reported_once(monkeypatch, caplog) -> None:
    """One node whose reconcile raises karpy's own error: the others' due times and reconciles go
    on; one ERROR and one Event until the node changes."""
    pools = {"plain": Provisioner(name="plain", kind="NodePool", ttl_seconds_until_expired=60)}
    world = PlainWorld(monkeypatch, pools)
    bad = world.add(pool_node("bad", "broken"))
    good = world.add(pool_node("good", "plain"))

    def lookup(name: str | None) -> Provisioner | None:
        if name == "broken":
            raise ArithmeticError("a value karpy cannot compute with")
        return pools.get(name or "")

    world.worker.provisioners = lookup
    world.now = T0 + timedelta(minutes=5)
    assert [name for name, _ in world.worker._due()] == [good]
    for _ in range(3):
        world.worker.process(bad)
        world.worker.queue.done(bad)
    world.worker.process(good)
    assert world.worker.faults.names() == {bad}
    errors = [r for r in caplog.records if r.levelname == "ERROR" and "Skipping node bad" in r.message]
    assert len(errors) == 1
    assert [(n, r) for n, r, _ in world.ctx.recorder.published] == [("bad", "FailedReconcile")]
    # A new resourceVersion is news again.
    world.manifests[bad]["metadata"]["resourceVersion"] = "2"
    world.worker.process(bad)
    errors = [r for r in caplog.records if r.levelname == "ERROR" and "Skipping node bad" in r.message]
    assert len(errors) == 2
