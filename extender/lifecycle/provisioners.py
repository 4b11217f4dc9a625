"""Provisioner TTLs as the lifecycle sees them: a short-lived cached listing of the CRs."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from extender.api.provisioner import Provisioner
from extender.cluster.provisioners import list_configured
from extender.settings import Settings

#: A lookup miss re-lists, but not more often than this.
MISS_RELOAD = 1.0


class ProvisionerLookup:
    """`get(name)`; re-lists at most every `ttl` seconds so a TTL edited in the CR applies promptly."""

    def __init__(
        self,
        kube: Any,
        *,
        settings: Settings,
        ttl: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        lister: Callable[[], list[Provisioner]] | None = None,
    ) -> None:
        self._list = lister or (lambda: list_configured(kube, settings))
        self._ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        self._loaded_at: float | None = None
        self._by_name: dict[str, Provisioner] = {}

    def get(self, name: str | None) -> Provisioner | None:
        if not name:
            return None
        with self._lock:
            age = None if self._loaded_at is None else self._clock() - self._loaded_at
            # A name we have not seen is most likely a Provisioner created after the last listing.
            stale = age is None or age >= self._ttl or (name not in self._by_name and age >= MISS_RELOAD)
            if stale:
                self._by_name = {p.name: p for p in self._list()}
                self._loaded_at = self._clock()
            return self._by_name.get(name)
