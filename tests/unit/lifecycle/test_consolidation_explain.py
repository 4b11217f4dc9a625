"""`karpy explain node`'s pure part (consolidation/explain.py): each blocker kind with its
numbers, and the best move for the node alone with its saving and verdict."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from extender.api.affinity import LabelSelector
from extender.api.disruption import DO_NOT_DISRUPT, Budget
from extender.lifecycle.consolidation.explain import NodeExplanation, as_json, explain_node, render
from extender.lifecycle.consolidation.view import PdbAllowance, Settings

from .test_consolidation import node, pod, pods, provisioner, view


def messages(e: NodeExplanation) -> tuple[str, ...]:
    return tuple(b.message for b in e.blockers)


def busy_pair(**small_state: object) -> tuple:
    """small's one pod fits on big, which only receives: deleting small saves an m5.large."""
    big = node("big", "m5.2xlarge", pods("a", 2), do_not_consolidate=True)
    small = node("small", "m5.large", [pod("b-0", labels={"app": "b"})], **small_state)
    return big, small


def test_a_candidate_is_taken_now_with_its_saving() -> None:
    big, small = busy_pair()
    e = explain_node(view(big, small), "small")
    assert e.blockers == () and e.taking is not None and e.taking.names == ("small",)
    assert e.move is not None and not e.move.replacements and e.refusal is None
    assert e.reason.startswith("consolidating: Consolidating 1 node(s) by deletion")
    text = render(e)
    assert "consolidation takes it now" in text and f"saving ${small.price:.3f}/h" in text


def test_pdb_blocker_names_it_and_its_allowed_disruptions() -> None:
    big, small = busy_pair()
    pdb = PdbAllowance("default", LabelSelector(match_labels=(("app", "b"),)), 0, name="b-pdb")
    e = explain_node(view(big, small, pdbs=(pdb,)), "small")
    assert messages(e) == ("pdb default/b-pdb prevents pod evictions (it allows 0 disruptions)",)
    assert [b.reason for b in e.blockers] == ["PodDisruptionBudget"]
    assert e.taking is None and e.move is not None and e.refusal is None  # the move exists; PDB holds it


def test_do_not_disrupt_pod_and_node() -> None:
    big = node("big", "m5.2xlarge", pods("a", 2), do_not_consolidate=True)
    guarded = node("small", "m5.large", [pod("g", annotations={DO_NOT_DISRUPT: "true"})], do_not_disrupt=True)
    e = explain_node(view(big, guarded), "small")
    assert messages(e) == (
        f"node has {DO_NOT_DISRUPT} annotation",
        f"pod default/g has {DO_NOT_DISRUPT} annotation",
    )


def test_consolidate_after_left_and_young_node() -> None:
    big, small = busy_pair(idle_seconds=100.0, age=30.0)
    pool = dataclasses.replace(provisioner(), kind="NodePool", consolidate_after=300)
    e = explain_node(view(big, small, provisioners=(pool,)), "small")
    assert messages(e) == (
        "node is 30s old, younger than 60s (30s left)",
        "its last pod event was 100s ago, more recent than consolidateAfter (300s, 200s left)",
    )


def test_a_young_node_never_reads_as_old_as_the_minimum() -> None:
    """2.6 s of 3 read "node is 3s old, younger than 3s (0s left)" (seen live in test_explain_node)."""
    big, small = busy_pair(age=2.6)
    e = explain_node(view(big, small), "small", Settings(min_node_age_seconds=3.0))
    assert messages(e) == ("node is 2s old, younger than 3s (1s left)",)


def test_budget_window_with_its_schedule() -> None:
    big, small = busy_pair()
    closed = Budget(nodes="0", schedule="@daily", duration=3600)
    pool = dataclasses.replace(provisioner(), budgets=(closed,))
    at = datetime(2026, 1, 1, 0, 10, tzinfo=UTC)  # ten minutes into the daily window
    e = explain_node(view(big, small, provisioners=(pool,), now=at), "small")
    assert messages(e) == (
        "the disruption budget allows no more Underutilized disruptions now"
        " (nodes 0 during '@daily' for 3600s of 2 node(s); 0 already being disrupted)",
    )
    assert (
        explain_node(view(big, small, provisioners=(pool,), now=at.replace(hour=2)), "small").blockers == ()
    )


def test_pending_pods_and_a_launching_node_hold_the_whole_provisioner() -> None:
    big, small = busy_pair()
    launching = node("new", "m5.large", [], ready=False, age=30.0)
    waiting = tuple(pod(f"w{i}", "100") for i in range(5))
    e = explain_node(view(big, small, launching, pending=waiting), "small")
    assert messages(e) == (
        "1 node(s) still launching (new)",
        "5 pod(s) pending for it (default/w0, default/w1, default/w2 +2 more)",
    )


def test_a_saving_below_the_threshold_is_the_verdict() -> None:
    big, small = busy_pair()
    strict = provisioner(min_savings="0.5")
    e = explain_node(view(big, small, provisioners=(strict,)), "small")
    assert e.blockers == () and e.taking is None and e.move is not None
    assert e.refusal == (
        f"saving ${small.price:.3f}/h is below provisioner default's consolidation-min-savings"
        " ($0.5/h and 0%: $0.500/h here)"
    )
    assert e.reason == e.refusal
    assert as_json(e)["bestMove"]["worthIt"] is False


def test_an_unknown_node_is_a_key_error() -> None:
    with pytest.raises(KeyError):
        explain_node(view(), "nope")
