"""Offerings the cloud refused for capacity lately, left out of the next plans.

Owner: the provisioning controller. Launch groups write it from the launch pool, the lifecycle
writes it (a spot interruption), the planner reads it: every access holds `_lock` (a TTLCache is
not thread-safe).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator

from cachetools import TTLCache

from extender.scheduling.instancetypes import OfferingKey

#: Offerings EC2 refused for capacity are left out this long (modern Karpenter's UnavailableOfferingsTTL).
UNAVAILABLE_TTL_SECONDS = 180.0


class UnavailableOfferings:
    def __init__(self, clock: Callable[[], float]) -> None:
        self._keys: TTLCache[OfferingKey, bool] = TTLCache(
            maxsize=10_000, ttl=UNAVAILABLE_TTL_SECONDS, timer=clock
        )
        self._lock = threading.Lock()

    def mark(self, keys: Iterable[OfferingKey]) -> None:
        with self._lock:
            for key in keys:
                self._keys[key] = True

    def clear(self) -> None:
        """Forget every refusal (capacity is known to be back)."""
        with self._lock:
            self._keys.clear()

    def current(self) -> frozenset[OfferingKey]:
        with self._lock:
            return frozenset(self._keys)

    def __iter__(self) -> Iterator[OfferingKey]:
        return iter(self.current())
