"""Pods that wait for something no immediate re-plan gives them: no Provisioner takes them, the
cloud failed their launch, the re-check refused them twice, or this replica stopped leading.

Parked pods are pod keys (the batch re-reads the pods themselves). Each key comes back after the
parking policy's backoff (`extender.retry.PARKED`): a pod parked again and again waits longer, so a
pod no Provisioner will ever take is not re-planned (and re-reported) at the pace of a new one.

Owner: the provisioning controller. The loop, launch-pool threads (a group that cannot launch) and
bind threads (refused pods) park, the loop takes: every access holds `_lock`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from cachetools import TTLCache

from extender import retry

#: A key parked again within this long counts as parked again (its backoff grows); later it starts over.
FORGET_SECONDS = 600.0


class Parked:
    def __init__(
        self,
        clock: Callable[[], float],
        policy: retry.Backoff = retry.PARKED,
        rand: Callable[[], float] | None = None,
    ) -> None:
        self._clock = clock
        self._policy = policy
        self._rand = rand
        #: pod key -> clock time its retry is due.
        self._due: dict[str, float] = {}
        #: pod key -> times parked lately (the backoff's exponent).
        self._times: TTLCache[str, int] = TTLCache(maxsize=100_000, ttl=FORGET_SECONDS, timer=clock)
        self._lock = threading.Lock()

    def park(self, keys: Iterable[str]) -> None:
        now = self._clock()
        with self._lock:
            for key in keys:
                times = self._times.get(key, 0)
                self._times[key] = times + 1
                delay = self._policy.delay(times, self._rand) if self._rand else self._policy.delay(times)
                self._due[key] = min(self._due.get(key, now + delay), now + delay)

    def take(self, *, everything: bool = False) -> list[str]:
        """The keys whose retry is due (all of them with `everything`), no longer parked."""
        now = self._clock()
        with self._lock:
            due = [key for key, at in self._due.items() if everything or at <= now]
            for key in due:
                del self._due[key]
        return due

    def next_in(self) -> float | None:
        """Seconds until the next retry is due; None when nothing is parked."""
        with self._lock:
            if not self._due:
                return None
            return max(min(self._due.values()) - self._clock(), 0.0)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._due

    def __len__(self) -> int:
        with self._lock:
            return len(self._due)
