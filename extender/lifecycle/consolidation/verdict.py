"""Each node's consolidation verdict as a NodeClaim condition and a Node Event would say it: pure.

Karpenter v1 keeps a `Consolidatable` condition on each NodeClaim (kubernetes-sigs/karpenter
pkg/controllers/nodeclaim/disruption/consolidation.go; type name from pkg/apis/v1/nodeclaim_status.go):
`True` once consolidateAfter has elapsed since the last pod event, and removed otherwise, so the
claim never says why. karpy writes it for every node of a consolidating pool with the blockers
consolidation filters by (`eligibility.assess`): `True` (reason `Consolidatable`)
when nothing blocks the node, else `False` with the blockers' reasons joined by commas (a valid
metav1 reason: `^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`) and their messages with the numbers.
Karpenter's `Unconsolidatable` Event (pkg/controllers/disruption/events) carries the same words.
A candidate whose single-node move the pass simulated and found not worth its evictions (`worth`:
the pool's savings threshold, Balanced's score) is `False` too, reason `SavingBelowThreshold` or
`BalancedScoreTooLow`: the worker passes in what `decide` judged, so it costs no solve more.

A verdict changes when its reasons do, not its numbers: "300s left" becoming "290s left" is the
same verdict, so the writer (verdict_writer.py) writes on a change of reasons only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from extender.lifecycle.consolidation.eligibility import Assessment, Blocker, assess
from extender.lifecycle.consolidation.view import ClusterView, Settings

CONSOLIDATABLE = "Consolidatable"
#: Karpenter's Event reason for a node consolidation cannot take (events.Unconsolidatable).
UNCONSOLIDATABLE = "Unconsolidatable"
#: The message of a node nothing blocks.
NOTHING_BLOCKS = "nothing blocks consolidation of this node"


@dataclass(frozen=True)
class Verdict:
    #: "True" or "False", as the condition's status.
    status: str
    #: The condition's reason: `Consolidatable`, or the blockers' reasons, comma-joined.
    reason: str
    message: str

    @property
    def event_reason(self) -> str:
        return CONSOLIDATABLE if self.status == "True" else UNCONSOLIDATABLE


def of(blockers: tuple[Blocker, ...]) -> Verdict:
    """The verdict of one node's blockers (none: consolidatable)."""
    if not blockers:
        return Verdict("True", CONSOLIDATABLE, NOTHING_BLOCKS)
    reasons = list(dict.fromkeys(b.reason for b in blockers))
    return Verdict("False", ",".join(reasons), "; ".join(b.message for b in blockers))


def verdicts(
    view: ClusterView,
    settings: Settings,
    assessment: Assessment | None = None,
    refused: Mapping[str, Blocker] | None = None,
) -> dict[str, Verdict]:
    """Node -> its verdict, for the karpy nodes of pools with consolidation enabled; nodes already
    on their way out are left out (their verdict would be written just before they go).
    `assessment`: the pass's, when it has one (`eligibility.assess`); `refused`: nodes whose
    single-node move was simulated and found not worth its evictions (`decide`'s `judged`), named
    after their other blockers."""
    found = (assessment or assess(view, settings)).blockers
    refused = refused or {}
    return {
        name: of((*blockers, refused[name]) if name in refused else blockers)
        for name, blockers in found.items()
    }
