"""Disruption budgets (extender/lifecycle/budgets.py): one budget per Provisioner, shared by every
voluntary disruption mechanism."""

from __future__ import annotations

import pytest

from extender.lifecycle import budgets
from extender.lifecycle.budgets import DisruptionLedger


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
    assert ledger.acquire("p", ["a"], "expired", budget="2", total=10)
    assert ledger.acquire("p", ["b"], "empty", budget="2", total=10)
    assert not ledger.acquire("p", ["c"], "consolidation", budget="2", total=10)
    assert ledger.held("p") == {"a": "expired", "b": "empty"}
    ledger.release("a")
    assert ledger.acquire("p", ["c"], "consolidation", budget="2", total=10)


def test_acquire_is_all_or_nothing_and_counts_deleting_nodes() -> None:
    ledger = DisruptionLedger()
    assert not ledger.acquire("p", ["a", "b", "c"], "consolidation", budget="2", total=10)
    assert ledger.held() == {}
    assert not ledger.acquire("p", ["a"], "empty", budget="1", total=10, deleting={"z"})
    # a node already held (or already deleting) needs no second slot
    assert ledger.acquire("p", ["z"], "empty", budget="1", total=10, deleting={"z"})
    assert ledger.acquire("p", ["a"], "empty", budget="1", total=10)
    assert ledger.acquire("p", ["a"], "empty", budget="1", total=10)


def test_budgets_are_per_provisioner() -> None:
    ledger = DisruptionLedger()
    assert ledger.acquire("p", ["a"], "empty", budget="1", total=3)
    assert ledger.acquire("q", ["b"], "empty", budget="1", total=3)
    assert not ledger.acquire("p", ["c"], "empty", budget="1", total=3)
