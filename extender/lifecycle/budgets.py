"""Disruption budgets: how many of a Provisioner's nodes may be voluntarily disrupted at once, per
reason, shared by every mechanism, so no two together take down more than it allows.

A budget's `nodes` is "3" nodes or "10%" of the Provisioner's nodes. A percentage rounds up as
Karpenter's does (`GetScaledValueFromIntOrPercent(..., roundUp=true)`), so a Provisioner with any
node may disrupt at least one unless its budget is "0" / "0%". Nodes already being deleted (for any
reason, interruption and expiry included) use up the budget: they are capacity the Provisioner is
losing right now.

Which budgets count (`allowed_by_reason`, Karpenter v1 `NodePool.GetAllowedDisruptionsByReason`,
pkg/apis/v1/nodepool.go): a v1 budget applies to a disruption of reason R when its `reasons` are
empty or hold R, and is active when it has no schedule or `now` lies in [last cron fire, fire +
duration) (`Budget.IsActive`); the allowed count is the minimum over the active budgets that apply,
unlimited when none does. A v1alpha5 Provisioner's one `spec.disruption.nodes` is loaded as a
budget for every reason. karpy's mechanisms map to reasons as Karpenter's do:
emptiness (`ttlSecondsAfterEmpty` / WhenEmpty) and consolidation of empty nodes -> Empty,
consolidation deleting or replacing nodes with pods -> Underutilized, drift -> Drifted. Expiry has no
reason: v1's expiration is forceful and no budget holds it (`nodeclaim/expiration`, designs/
forceful-expiration.md); only the v1alpha5 single budget, which karpy always applied to it, still
does. Interruption is never budgeted.

`allowed`/`allowed_by_reason` are pure; `DisruptionLedger` is the thread-safe, in-process record of
which nodes each mechanism holds a slot for.
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime

from extender.api import cron
from extender.api.disruption import REASONS, Budget
from extender.api.provisioner import Provisioner

#: Karpenter's "no budget applies" (math.MaxInt32).
UNLIMITED = 2**31 - 1
EMPTY, UNDERUTILIZED, DRIFTED = REASONS
#: The reason of a disruption no v1 budget holds (expiry): only the v1alpha5 budget counts.
EXPIRED = "Expired"
#: The ledger's hold reasons (what karpy is doing) -> the budget reason they count against.
BUDGET_REASONS = {"empty": EMPTY, "expired": EXPIRED, "drifted": DRIFTED}
#: A function of the Provisioner's node count to the nodes it may have disrupting at once.
Limit = Callable[[int], int]


#: Digits beyond which a count is "unlimited" rather than converted (int() of thousands of digits
#: raises, and no cluster has 10^10 nodes).
MAX_COUNT_DIGITS = 10


def allowed(budget: str, total: int) -> int:
    """How many of `total` nodes the budget lets be disrupted at once. A value admission should
    have refused is clamped: a count too long to be real is UNLIMITED, a percentage past 100 is
    100 %, and one that is not a number fails closed at 0 (as an unparsable schedule does)."""
    text = budget.strip()
    percent = text.endswith("%")
    digits = text[:-1] if percent else text
    if not digits.isascii() or not digits.isdigit():
        return 0
    if len(digits) > MAX_COUNT_DIGITS:
        return total if percent else UNLIMITED
    if percent:
        return math.ceil(min(int(digits), 100) * total / 100)
    return min(int(digits), UNLIMITED)


def free(budget: str, total: int, disrupting: int) -> int:
    """Slots left for new disruptions."""
    return max(allowed(budget, total) - disrupting, 0)


@functools.lru_cache(maxsize=256)
def _schedule(spec: str) -> cron.Schedule:
    return cron.parse(spec)


def budget_allows(budget: Budget, total: int, now: datetime | None) -> int:
    """Karpenter's `Budget.GetAllowedDisruptions`: unlimited outside its schedule window, its
    `nodes` inside it (or always, without a schedule). An unparsable schedule (admission should
    have refused it) fails closed at 0, as Karpenter's does; so does an unknown `now` (None):
    every window counts as open."""
    if budget.schedule is not None:
        try:
            schedule = _schedule(budget.schedule)
        except ValueError:  # CronError, or a field int() refuses (thousands of digits)
            return 0
        if now is not None and not _window_open(schedule, budget.duration or 0, now):
            return UNLIMITED
    return allowed(budget.nodes, total)


def _window_open(schedule: cron.Schedule, duration: float, now: datetime) -> bool:
    """`cron.window_open`, total: a window longer than the calendar before `now` (`now - duration`
    past datetime.min raises OverflowError) holds every fire there has been, so it is open now (a
    schedule that never fires counts as open too, as robfig's zero time does)."""
    try:
        return cron.window_open(schedule, duration, now)
    except OverflowError:
        return True


def applies(budget: Budget, reason: str) -> bool:
    return not budget.reasons or reason in budget.reasons


def allowed_by_reason(prov: Provisioner, reason: str, total: int, now: datetime | None) -> int:
    """How many of the Provisioner's `total` nodes may be disrupting for `reason` at `now`."""
    if reason == EXPIRED and not prov.budgets_hold_expiry:
        return UNLIMITED
    return min((budget_allows(b, total, now) for b in prov.budgets if applies(b, reason)), default=UNLIMITED)


def limit(prov: Provisioner | None, reason: str, now: datetime) -> Limit:
    """`allowed_by_reason` as the ledger asks it (the node count is the ledger's census); a node of
    no known Provisioner may not be disrupted."""
    if prov is None:
        return lambda _total: 0
    return lambda total: allowed_by_reason(prov, reason, total, now)


def free_by_reason(prov: Provisioner, reason: str, total: int, disrupting: int, now: datetime | None) -> int:
    return max(allowed_by_reason(prov, reason, total, now) - disrupting, 0)


@dataclass(frozen=True)
class Hold:
    provisioner: str
    reason: str


class DisruptionLedger:
    """Which nodes hold a disruption slot of their Provisioner's budget, and why.

    `acquire` is all-or-nothing for a set of nodes (a consolidation of three nodes needs three
    slots), and counts the Provisioner's deleting nodes as taken, whatever took them (Karpenter's
    `BuildDisruptionBudgetMapping` subtracts every disrupting node from every reason's count).
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
        allowed: Limit,
        total: int,
        deleting: Collection[str] = (),
    ) -> bool:
        """Take a slot for each of `nodes` (nodes of `provisioner`); False, taking none, if
        `allowed(total)` cannot cover them all. A node already held or deleting costs nothing more."""
        with self._lock:
            taken = {n for n, h in self._held.items() if h.provisioner == provisioner} | set(deleting)
            new = [n for n in dict.fromkeys(nodes) if n not in taken]
            if new and len(taken) + len(new) > allowed(total):
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


def nodes(budget: str) -> Limit:
    """A fixed `nodes` budget ("3", "10%") as a Limit."""
    return lambda total: allowed(budget, total)
