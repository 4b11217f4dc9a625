"""Disruption budgets: one per Provisioner, shared by every voluntary disruption (emptiness, expiry,
consolidation), so no two mechanisms together take down more of its nodes than it allows.

The budget is `spec.disruption.nodes` ("3" nodes or "10%" of the Provisioner's nodes, default 10 %),
Karpenter's NodePool budget without the cron schedule. A percentage rounds up as Karpenter's does
(`GetScaledValueFromIntOrPercent(..., roundUp=true)`), so a Provisioner with any node may disrupt at
least one unless its budget is "0" / "0%". Nodes already being deleted (for any reason, interruption
included) use up the budget: they are capacity the Provisioner is losing right now.

`allowed` is pure; `DisruptionLedger` is the thread-safe, in-process record of which nodes each
mechanism holds a slot for.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Collection, Sequence
from dataclasses import dataclass


def allowed(budget: str, total: int) -> int:
    """How many of `total` nodes the budget lets be disrupted at once."""
    if budget.endswith("%"):
        return math.ceil(int(budget[:-1]) * total / 100)
    return int(budget)


def free(budget: str, total: int, disrupting: int) -> int:
    """Slots left for new disruptions."""
    return max(allowed(budget, total) - disrupting, 0)


@dataclass(frozen=True)
class Hold:
    provisioner: str
    reason: str


class DisruptionLedger:
    """Which nodes hold a disruption slot of their Provisioner's budget, and why.

    `acquire` is all-or-nothing for a set of nodes (a consolidation of three nodes needs three
    slots), and counts the Provisioner's deleting nodes as taken.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, Hold] = {}

    def acquire(
        self,
        provisioner: str,
        nodes: Sequence[str],
        reason: str,
        *,
        budget: str,
        total: int,
        deleting: Collection[str] = (),
    ) -> bool:
        """Take a slot for each of `nodes` (nodes of `provisioner`); False, taking none, if the
        budget cannot cover them all. A node already held or deleting costs nothing more."""
        with self._lock:
            taken = {n for n, h in self._held.items() if h.provisioner == provisioner} | set(deleting)
            new = [n for n in dict.fromkeys(nodes) if n not in taken]
            if new and len(taken) + len(new) > allowed(budget, total):
                return False
            for node in new:
                self._held[node] = Hold(provisioner, reason)
            return True

    def release(self, node: str) -> None:
        with self._lock:
            self._held.pop(node, None)

    def held(self, provisioner: str | None = None) -> dict[str, str]:
        """node -> reason for the nodes holding a slot (of one Provisioner, or all)."""
        with self._lock:
            return {
                n: h.reason
                for n, h in self._held.items()
                if provisioner is None or h.provisioner == provisioner
            }
