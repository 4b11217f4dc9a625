"""Why each pending pod is still pending, as the last batch that planned it found: the reasons of
`karpy_pods_pending{reason}`.

A pod the watch lists as pending is `waiting_for_capacity` unless a batch found a rule karpy does
not model in it (`unmodelled`), found it over its Provisioner's limits (`over_limit`), or it is
held on a node for kube-scheduler to bind (`left_to_scheduler`). Batches write (`set`, `clear`);
the observer reads (`reason`). Bounded: an entry outlives its pod by at most TTL_SECONDS.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from cachetools import TTLCache

WAITING = "waiting_for_capacity"
LEFT_TO_SCHEDULER = "left_to_scheduler"
UNMODELLED = "unmodelled"
OVER_LIMIT = "over_limit"
REASONS = (WAITING, LEFT_TO_SCHEDULER, UNMODELLED, OVER_LIMIT)

TTL_SECONDS = 3600.0


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
