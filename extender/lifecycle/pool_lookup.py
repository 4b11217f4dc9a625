"""Provisioners and NodePools as the lifecycle sees them: a short-lived cached listing of the CRs,
and, for a judgment that must not rest on a stale listing (drift), one no older than a given node.

The cache is keyed by name, so on its own it cannot tell a NodePool deleted and re-created under
the same name, or edited, since it was listed: a node launched from the new object would be judged
against the old one (issue 31: such a node was marked drifted and terminated 150 ms after its pod
was bound). `fresh` closes that: a node was launched from a listing provisioning took before the
node was created, so a listing started after the node's creation is at least as new as the spec
the node was launched from.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from extender.api.node import Node
from extender.api.provisioner import Provisioner
from extender.cluster.pool_resources import list_configured
from extender.lifecycle.context import utcnow
from extender.settings import Settings

log = logging.getLogger("karpy.lifecycle")

#: A lookup miss re-lists, but not more often than this.
MISS_RELOAD = 1.0
#: How far the API server's clock (a node's creationTimestamp) may run ahead of this process's:
#: a listing must have started this long after a node's creation to count as newer than it.
CLOCK_SKEW = timedelta(seconds=10)


class ProvisionerLookup:
    """`get(name)`; re-lists at most every `ttl` seconds so a TTL edited in the CR applies promptly.
    `fresh(node)` re-lists unless the cached listing started after the node was created."""

    def __init__(
        self,
        kube: Any,
        *,
        settings: Settings,
        ttl: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] = utcnow,
        lister: Callable[[], list[Provisioner]] | None = None,
    ) -> None:
        self._list = lister or (lambda: list_configured(kube, settings))
        self._ttl = ttl
        self._clock = clock
        self._wall = wall
        self._lock = threading.Lock()
        self._loaded_at: float | None = None
        #: When the cached listing started, on `wall` (compared with nodes' creation times).
        self._listed_at: datetime | None = None
        self._by_name: dict[str, Provisioner] = {}

    def get(self, name: str | None) -> Provisioner | None:
        if not name:
            return None
        with self._lock:
            age = None if self._loaded_at is None else self._clock() - self._loaded_at
            # A name we have not seen is most likely a Provisioner created after the last listing.
            stale = age is None or age >= self._ttl or (name not in self._by_name and age >= MISS_RELOAD)
            if stale:
                self._reload()
            return self._by_name.get(name)

    def fresh(self, node: Node) -> Provisioner | None:
        """The node's Provisioner from a listing that started after the node was created."""
        name, created = node.provisioner, node.created
        if not name:
            return None
        with self._lock:
            listed = self._listed_at
            if listed is None or created is None or listed < created + CLOCK_SKEW:
                before = self._by_name.get(name)
                self._reload()
                after = self._by_name.get(name)
                if before is not None and after is not None and before.uid != after.uid:
                    log.debug("%s %s was re-created since it was last listed", after.noun.capitalize(), name)
            return self._by_name.get(name)

    def _reload(self) -> None:
        started = self._wall()
        self._by_name = {p.name: p for p in self._list()}
        self._loaded_at = self._clock()
        self._listed_at = started
