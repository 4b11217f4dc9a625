"""Consolidation's verdict per node (consolidation/verdict.py, pure) and its writer's change rule
(verdict_writer.py) on plain data; the NodeClaim condition and the Events on the local control
plane are tests/integration/test_explain_node.py's.

Karpenter v1's `Consolidatable` condition (kubernetes-sigs/karpenter
pkg/controllers/nodeclaim/disruption/consolidation.go) and `Unconsolidatable` Event
(pkg/controllers/disruption/events/events.go) are the models; karpy's reasons name the blockers."""

from __future__ import annotations

import dataclasses

from extender.api.affinity import LabelSelector
from extender.lifecycle.consolidation import eligibility, verdict
from extender.lifecycle.consolidation.decide import DEFAULTS
from extender.lifecycle.consolidation.eligibility import Blocker
from extender.lifecycle.consolidation.verdict_writer import VerdictWriter
from extender.lifecycle.consolidation.view import PdbAllowance
from tests import builders

from .test_consolidation import node, pod, pods, provisioner, view


def test_no_blocker_is_consolidatable_and_blockers_join_their_reasons() -> None:
    assert verdict.of(()) == verdict.Verdict("True", "Consolidatable", verdict.NOTHING_BLOCKS)
    both = verdict.of(
        (
            Blocker("DoNotDisruptPod", "pod default/a has karpenter.sh/do-not-disrupt annotation"),
            Blocker("DoNotDisruptPod", "pod default/b has karpenter.sh/do-not-disrupt annotation"),
            Blocker("PodsPending", "1 pod(s) pending for it (default/w)"),
        )
    )
    assert both.status == "False" and both.reason == "DoNotDisruptPod,PodsPending"
    assert both.message == (
        "pod default/a has karpenter.sh/do-not-disrupt annotation;"
        " pod default/b has karpenter.sh/do-not-disrupt annotation; 1 pod(s) pending for it (default/w)"
    )
    assert both.event_reason == "Unconsolidatable" and verdict.of(()).event_reason == "Consolidatable"


def test_verdicts_cover_the_consolidating_pools_karpy_nodes_not_leaving() -> None:
    pdb = PdbAllowance("default", LabelSelector(match_labels=(("app", "b"),)), 0, name="b-pdb")
    held = node("held", "m5.large", [pod("b-0", labels={"app": "b"})])
    free = node("free", "m5.large", pods("a", 1))
    leaving = node("leaving", "m5.large", pods("c", 1), disrupting=True)
    foreign = node("foreign", "m5.large", pods("d", 1), karpy=False)
    off = node("off", "m5.large", pods("e", 1), provisioner="off")
    pools = (provisioner(), provisioner("off", enabled=False))
    found = verdict.verdicts(
        view(held, free, leaving, foreign, off, pdbs=(pdb,), provisioners=pools), DEFAULTS
    )
    assert sorted(found) == ["free", "held"]
    assert found["free"].status == "True"
    assert found["held"] == verdict.Verdict(
        "False", "PodDisruptionBudget", "pdb default/b-pdb prevents pod evictions (it allows 0 disruptions)"
    )


def test_only_the_reasons_make_a_change_not_the_numbers() -> None:
    pool = dataclasses.replace(provisioner(), kind="NodePool", consolidate_after=300)
    early = node("n", "m5.large", pods("a", 1), idle_seconds=10.0)
    later = dataclasses.replace(early, idle_seconds=200.0)
    first = verdict.verdicts(view(early, provisioners=(pool,)), DEFAULTS)["n"]
    second = verdict.verdicts(view(later, provisioners=(pool,)), DEFAULTS)["n"]
    assert first.reason == second.reason == "ConsolidateAfter" and first.message != second.message
    assert "(300s, 290s left)" in first.message and "(300s, 100s left)" in second.message


def test_the_writer_announces_a_node_once_per_change_of_reasons() -> None:
    events: list[tuple[str, str, str]] = []
    writer = VerdictWriter(None, lambda n, reason, message: events.append((n.name, reason, message)))
    nodes = {"n": builders.node("n", created=None, ready=None, instance=None)}
    pool = provisioner()

    def write(v: verdict.Verdict) -> list[str]:
        return writer.write({"n": v}, nodes, lambda _: pool)

    waiting = verdict.of((Blocker("ConsolidateAfter", "its last pod event was 10s ago ... 290s left"),))
    assert write(waiting) == ["n"]
    ticking = verdict.of((Blocker("ConsolidateAfter", "its last pod event was 20s ago ... 280s left"),))
    assert write(ticking) == [] and write(ticking) == []
    assert write(verdict.of(())) == ["n"]
    assert events == [
        ("n", "Unconsolidatable", "its last pod event was 10s ago ... 290s left"),
        ("n", "Consolidatable", verdict.NOTHING_BLOCKS),
    ]
    # A node gone is forgotten: one by that name later is announced afresh.
    assert writer.write({}, {}, lambda _: pool) == []
    assert write(verdict.of(())) == ["n"] and len(events) == 3


def test_one_assessment_gives_the_candidates_and_the_verdicts() -> None:
    """A pass filters every node once (`assess`): a candidate is a node in play that neither it nor
    its Provisioner holds back. A closed budget blocks its verdict but keeps it a candidate (the
    decision applies budgets itself, and the budget log needs the candidates it holds back)."""
    budgeted = (provisioner(budget="0"),)
    idle, held = (
        node("idle", "m5.large", pods("a", 1)),
        node("held", "m5.large", pods("b", 1), age=1.0),
    )
    leaving = node("leaving", "m5.large", pods("c", 1), disrupting=True)
    found = eligibility.assess(view(idle, held, leaving, provisioners=budgeted), DEFAULTS)
    assert [n.name for n in found.candidates] == ["idle"]
    assert sorted(found.blockers) == ["held", "idle"]
    assert [b.reason for b in found.blockers["idle"]] == ["DisruptionBudget"]
    assert [b.reason for b in found.blockers["held"]] == ["NodeTooYoung", "DisruptionBudget"]
    cluster = view(idle, held, leaving, provisioners=budgeted)
    assert verdict.verdicts(cluster, DEFAULTS, found) == verdict.verdicts(cluster, DEFAULTS)
    assert [n.name for n in eligibility.candidates(cluster, DEFAULTS)] == ["idle"]
