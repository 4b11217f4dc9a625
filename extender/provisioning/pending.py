"""Why each pending pod is still pending, as the last batch that planned it found: the reasons of
`karpy_pods_pending{reason}`.

A pod the watch lists as pending is `waiting_for_capacity` unless a batch found a rule karpy does
not model in it (`unmodelled`), found it over its Provisioner's limits (`over_limit`), it is
held on a node for kube-scheduler to bind (`left_to_scheduler`), or every pool refuses it and
explain found the first rule of the most relevant one (`taint`, `requirement`, `too_big`, ...:
scheduling/explain.py RULES, a fixed set). Batches write (`set`, `clear`);
the observer reads (`reason`). Bounded: an entry outlives its pod by at most TTL_SECONDS.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from cachetools import TTLCache

from extender.scheduling import explain as rules

WAITING = "waiting_for_capacity"
LEFT_TO_SCHEDULER = "left_to_scheduler"
UNMODELLED = "unmodelled"
OVER_LIMIT = "over_limit"
#: A pod every pool refuses, by the first rule of its most relevant pool (scheduling/explain.py):
#: a fixed set, so the label stays bounded.
EXPLAINED = tuple(r for r in rules.RULES if r != rules.LIMIT)  # limits stay `over_limit`
REASONS = (WAITING, LEFT_TO_SCHEDULER, UNMODELLED, OVER_LIMIT, *EXPLAINED)

TTL_SECONDS = 3600.0


def code(rule: str) -> str:
    """The metric reason of an explained pod: its rule, `over_limit` for limits (as before)."""
    if rule == rules.LIMIT:
        return OVER_LIMIT
    return rule if rule in EXPLAINED else WAITING


class PendingReasons:
    def __init__(self, clock: Callable[[], float], *, maxsize: int = 100_000) -> None:
        self._lock = threading.Lock()
        self._reasons: TTLCache[str, str] = TTLCache(maxsize=maxsize, ttl=TTL_SECONDS, timer=clock)

    def set(self, key: str, reason: str) -> None:
        if reason not in REASONS:
            raise ValueError(f"pending reason {reason!r} is not one of {REASONS}")
        with self._lock:
            self._reasons[key] = reason

    def clear(self, keys: Iterable[str]) -> None:
        """A batch plans these pods afresh: what an earlier batch found no longer holds."""
        with self._lock:
            for key in keys:
                self._reasons.pop(key, None)

    def reason(self, key: str, *, held: bool) -> str:
        if held:
            return LEFT_TO_SCHEDULER
        with self._lock:
            return self._reasons.get(key, WAITING)
