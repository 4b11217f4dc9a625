"""A saving below the pool's savings threshold, named in the node's verdict (the `Consolidatable`
condition and Event, issue 34) from the single-node move the pass simulated anyway: no solve more."""

from __future__ import annotations

from typing import Any

import pytest

from extender.lifecycle.consolidation import decide as consolidation
from extender.lifecycle.consolidation import verdict, worth
from extender.lifecycle.consolidation.decide import DEFAULTS, decide
from extender.lifecycle.consolidation.eligibility import Blocker, assess
from extender.lifecycle.consolidation.worker import refusals

from .test_consolidation import node, pods, provisioner, view


def _cluster(min_savings: str) -> Any:
    big = node("big", "m5.2xlarge", pods("a", 2), do_not_consolidate=True)
    small = node("small", "m5.large", pods("b", 1))
    return view(big, small, provisioners=(provisioner(min_savings=min_savings),))


def _solves(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    solve = consolidation.solve

    def counted(*args: Any, **kw: Any) -> Any:
        calls.append(1)
        return solve(*args, **kw)

    monkeypatch.setattr(consolidation, "solve", counted)
    return calls


def test_a_move_below_the_threshold_is_named_in_the_verdict() -> None:
    """Deleting `small` saves its m5.large ($0.096/h): below a $0.10/h threshold, above $0.09/h."""
    cluster = _cluster("0.1")
    judged: dict[str, Blocker | None] = {}
    assert decide(cluster, DEFAULTS, None, judged) is None
    refused = judged["small"]
    assert refused is not None and refused.reason == worth.BELOW_THRESHOLD
    assert "$0.096/h is below" in refused.message and "$0.100/h" in refused.message
    assert set(judged) == {"small"}  # `big` is no candidate: never simulated, never judged
    found = verdict.verdicts(cluster, DEFAULTS, assess(cluster, DEFAULTS), {"small": refused})
    assert found["small"] == verdict.Verdict("False", worth.BELOW_THRESHOLD, refused.message)
    assert found["small"].event_reason == verdict.UNCONSOLIDATABLE
    # Without the refusal the same node reads consolidatable, as before this change.
    assert verdict.verdicts(cluster, DEFAULTS)["small"].status == "True"


def test_a_move_worth_it_is_judged_none() -> None:
    judged: dict[str, Blocker | None] = {}
    assert decide(_cluster("0.09"), DEFAULTS, None, judged) is not None
    assert judged == {"small": None}


def test_judging_costs_no_solve_more(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = _cluster("0.1")
    calls = _solves(monkeypatch)
    decide(cluster, DEFAULTS)
    without = len(calls)
    decide(cluster, DEFAULTS, None, {})
    assert without >= 1 and len(calls) == 2 * without


def test_a_refusal_is_kept_until_judged_again_and_only_while_nothing_else_blocks() -> None:
    """A pass that acts stops searching before some nodes: their last judgement stays, so the
    verdict does not flap; a new judgement replaces it; a node that is no candidate, or that a
    blocker (here its budget) holds, loses it: its blockers say why it stays."""
    low = Blocker(worth.BELOW_THRESHOLD, "saving $0.010/h is below ...")
    a, b, c = (node(name, "m5.large", pods(name, 1)) for name in "abc")
    cluster = view(a, b, c)
    everyone = assess(cluster, DEFAULTS)
    kept = refusals({}, {"a": low, "b": low}, everyone)
    assert kept == {"a": low, "b": low}
    assert refusals(kept, {"b": None}, everyone) == {"a": low}
    assert refusals(kept, {}, assess(view(b, c), DEFAULTS)) == {"b": low}
    closed = view(a, b, c, provisioners=(provisioner(budget="0"),))
    held = assess(closed, DEFAULTS)
    assert [n.name for n in held.candidates] == ["a", "b", "c"] and held.blockers["a"]
    assert refusals(kept, {}, held) == {}
