"""Why consolidation is or is not taking a node now (`karpy explain node NAME`): every blocker with
its numbers, and the best move the solver finds for the node with its $/h saving.

Pure: reads a ClusterView. Blockers come from the same rules the decision filters by
(`eligibility.blockers`: the node's, its Provisioner's, the disruption budget for the node's reason),
so what is explained is what `decide` does; the move is Karpenter's single-node move for the node
alone (delete it, or replace it by one cheaper node), simulated with the solver whatever blocks it,
then judged by `worth` (the savings threshold, Balanced).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from extender.lifecycle.consolidation import worth
from extender.lifecycle.consolidation.decide import DEFAULTS, Action, decide, single_node_move
from extender.lifecycle.consolidation.eligibility import Blocker, blockers
from extender.lifecycle.consolidation.view import ClusterView, Settings


@dataclass(frozen=True)
class NodeExplanation:
    node: str
    provisioner: str
    #: Why consolidation may not take the node now, each with its numbers; empty: a candidate.
    blockers: tuple[Blocker, ...]
    #: The action consolidation would take now, when it includes the node.
    taking: Action | None
    #: The best single-node move for the node alone (None: its pods fit nowhere cheaper).
    move: Action | None
    #: Why that move is not worth its evictions; None when it is.
    refusal: str | None

    @property
    def reason(self) -> str:
        """One line for a condition or an Event: the first blocker, else what the move comes to."""
        if self.taking is not None:
            return "consolidating: " + self.taking.describe()
        if self.blockers:
            return self.blockers[0].message
        if self.move is None:
            return "no cheaper placement for its pods"
        return self.refusal or "a candidate; consolidation found a better move elsewhere first"


def explain_node(view: ClusterView, name: str, settings: Settings = DEFAULTS) -> NodeExplanation:
    """Raises KeyError when the view has no node `name`."""
    node = next((n for n in view.nodes if n.name == name), None)
    if node is None:
        raise KeyError(name)
    found = blockers(node, view, settings)
    action = decide(view, settings)
    taking = action if action is not None and name in action.names else None
    move = single_node_move(view, node, settings)
    refusal = worth.refusal(view, move.nodes, move.saving) if move is not None and move.pods else None
    return NodeExplanation(name, node.provisioner, found, taking, move, refusal)


def render(e: NodeExplanation) -> str:
    lines = [f"Node {e.node} ({e.provisioner}):"]
    if e.taking is not None:
        lines.append(f"  consolidation takes it now: {e.taking.describe()}")
    elif e.blockers:
        lines += ["  not consolidated now:", *(f"  - {b.message}" for b in e.blockers)]
    else:
        lines.append("  a consolidation candidate; nothing blocks it")
    if e.move is None:
        lines.append("  best move for it alone: none (its pods fit nowhere cheaper)")
    else:
        verdict = f"not worth it: {e.refusal}" if e.refusal else "worth it"
        what = (
            "delete" if not e.move.replacements else "replace by " + e.move.replacements[0].instance_type.name
        )
        lines.append(
            f"  best move for it alone: {what}, saving ${e.move.saving:.3f}/h"
            f" (${e.move.price_before:.3f}/h → ${e.move.price_after:.3f}/h), {len(e.move.pods)} pod(s)"
            f" evicted; {verdict}"
        )
    return "\n".join(lines)


def as_json(e: NodeExplanation) -> dict[str, Any]:
    move = None
    if e.move is not None:
        move = {
            "kind": "replace" if e.move.replacements else "delete",
            "replacement": e.move.replacements[0].instance_type.name if e.move.replacements else None,
            "savingPerHour": round(e.move.saving, 6),
            "podsEvicted": len(e.move.pods),
            "worthIt": e.refusal is None,
            "refusal": e.refusal,
        }
    return {
        "node": e.node,
        "provisioner": e.provisioner,
        "blockers": [b.message for b in e.blockers],
        "reasons": [b.reason for b in e.blockers],
        "consolidating": e.taking.describe() if e.taking is not None else None,
        "bestMove": move,
        "reason": e.reason,
    }
