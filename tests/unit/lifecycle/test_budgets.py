"""Disruption budgets (extender/lifecycle/budgets.py): one budget per Provisioner, shared by every
voluntary disruption mechanism."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace

import pytest

from extender.api import labels
from extender.api.node import Node
from extender.api.provisioner_schema import load_provisioner
from extender.lifecycle import budgets, emptiness
from extender.lifecycle.budgets import DisruptionLedger, nodes
from extender.lifecycle.nodes import NodeWorker
from tests.builders import T0, node, stamp
from tests.unit.lifecycle.builders import context


@pytest.mark.parametrize(
    ("budget", "total", "expected"),
    [
        ("10%", 0, 0),
        ("10%", 1, 1),
        ("10%", 10, 1),
        ("10%", 11, 2),
        ("0%", 50, 0),
        ("100%", 7, 7),
        ("3", 2, 3),
        ("0", 9, 0),
    ],
)
def test_allowed_rounds_percentages_up(budget: str, total: int, expected: int) -> None:
    """Karpenter: GetScaledValueFromIntOrPercent(nodes, numNodes, roundUp=true)."""
    assert budgets.allowed(budget, total) == expected


def test_mechanisms_share_one_budget() -> None:
    ledger = DisruptionLedger()
    assert ledger.acquire("p", ["a"], "expired", allowed=nodes("2"), total=10)
    assert ledger.acquire("p", ["b"], "empty", allowed=nodes("2"), total=10)
    assert not ledger.acquire("p", ["c"], "consolidation", allowed=nodes("2"), total=10)
    assert ledger.held("p") == {"a": "expired", "b": "empty"}
    ledger.release("a")
    assert ledger.acquire("p", ["c"], "consolidation", allowed=nodes("2"), total=10)


def test_acquire_is_all_or_nothing_and_counts_deleting_nodes() -> None:
    ledger = DisruptionLedger()
    assert not ledger.acquire("p", ["a", "b", "c"], "consolidation", allowed=nodes("2"), total=10)
    assert ledger.held() == {}
    assert not ledger.acquire("p", ["a"], "empty", allowed=nodes("1"), total=10, deleting={"z"})
    # a node already held (or already deleting) needs no second slot
    assert ledger.acquire("p", ["z"], "empty", allowed=nodes("1"), total=10, deleting={"z"})
    assert ledger.acquire("p", ["a"], "empty", allowed=nodes("1"), total=10)
    assert ledger.acquire("p", ["a"], "empty", allowed=nodes("1"), total=10)


def test_budgets_are_per_provisioner() -> None:
    ledger = DisruptionLedger()
    assert ledger.acquire("p", ["a"], "empty", allowed=nodes("1"), total=3)
    assert ledger.acquire("q", ["b"], "empty", allowed=nodes("1"), total=3)
    assert not ledger.acquire("p", ["c"], "empty", allowed=nodes("1"), total=3)


# --- the ledger as emptiness, expiry and consolidation use it ---------------------------------------


def _worker_with(nodes: list[Node]) -> NodeWorker:
    clock_only = SimpleNamespace(clock=lambda: T0)
    worker = NodeWorker(ctx=clock_only, provisioners=lambda _name: None)  # type: ignore[arg-type]
    for obj in nodes:
        worker.track("ADDED", obj)
    return worker


def test_emptiness_expiry_and_consolidation_draw_from_one_budget() -> None:
    prov = load_provisioner({"metadata": {"name": "default"}, "spec": {"disruption": {"nodes": "2"}}})
    worker = _worker_with([node(f"n{i}", instance=f"i-{i}") for i in range(6)])
    assert worker.census("default")["total"] == 6
    assert worker.admit(prov, "n0", "expired")
    # consolidation takes the last slot through the same ledger
    assert worker.ledger.acquire(
        "default", ["n1"], "consolidation", allowed=nodes("2"), **worker.census("default")
    )
    assert not worker.admit(prov, "n2", "empty")
    worker.ledger.release("n1")
    assert worker.admit(prov, "n2", "empty")


def test_deleting_nodes_use_up_the_budget() -> None:
    prov = load_provisioner({"metadata": {"name": "default"}, "spec": {"disruption": {"nodes": "1"}}})
    worker = _worker_with([node("gone", deleting=True), node("n1", instance="i-2")])
    assert not worker.admit(prov, "n1", "empty")


def test_due_empty_node_waits_for_a_slot_and_is_not_deleted(monkeypatch: pytest.MonkeyPatch) -> None:
    deleted: list[str] = []
    monkeypatch.setattr(emptiness.nodepatch, "pods_on_node", lambda _kube, _node: [])
    monkeypatch.setattr(emptiness.nodepatch, "delete_node", lambda _kube, name: deleted.append(name))
    marks: dict[str, str] = {}

    class Marks:
        def mark_for_removal(self, node: str, reason: str) -> None:
            marks[node] = reason

        def unmark(self, node: str) -> None:
            marks.pop(node, None)

    ctx = context(Marks())
    ctx.clock = lambda: T0 + timedelta(seconds=60)
    due = node(annotations={labels.EMPTINESS_TIMESTAMP_ANNOTATION: stamp(T0)})
    assert emptiness.reconcile(ctx, due, [], 30, admit=lambda: False) == emptiness.BUDGET_POLL_SECONDS
    assert deleted == [] and marks == {}
    emptiness.reconcile(ctx, due, [], 30, admit=lambda: True)
    assert deleted == ["n1"]
