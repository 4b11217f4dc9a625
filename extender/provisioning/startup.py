"""Pod startup: seconds from a pod's creation to its bind and to Ready, for pods on karpy's nodes.

After Karpenter's pod metrics controller (pkg/controllers/metrics/pod, pods_startup_duration_seconds):
only pods this process saw pending are measured, so a restart or a relist does not observe pods
that started long ago; each pod is observed once per stage. Both the in-flight and the done sets
are bounded (a pod never bound or never Ready falls out after TRACK_SECONDS).

The pod watch (`pending`) and the bound-pod index (`on_bound`, API JSON) feed it from their watch
threads; `_lock` guards the two caches.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from cachetools import TTLCache

from extender.provisioning import metrics

#: How long a pod seen pending is followed for its bind and Ready, and how long a measured pod is
#: remembered so it is never measured twice.
TRACK_SECONDS = 3600.0
MAX_TRACKED = 100_000


def timestamp(raw: Any) -> float | None:
    """An RFC 3339 API timestamp as epoch seconds; None when absent or unreadable."""
    if not isinstance(raw, str) or not raw:
        return None
    try:
        return datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def condition_since(pod: Mapping[str, Any], kind: str) -> float | None:
    """When condition `kind` last became True; None while it is not True."""
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if isinstance(condition, Mapping) and condition.get("type") == kind:
            if condition.get("status") != "True":
                return None
            return timestamp(condition.get("lastTransitionTime"))
    return None


class StartupTracker:
    """`provisioner_of(node name)`: the Provisioner of a karpy node, None for any other node.
    `clock`: epoch seconds, for a stage whose condition carries no time."""

    def __init__(
        self,
        provisioner_of: Callable[[str], str | None],
        *,
        is_leader: Callable[[], bool] = lambda: True,
        clock: Callable[[], float],
        monotonic: Callable[[], float],
    ) -> None:
        self.provisioner_of = provisioner_of
        self.is_leader = is_leader
        self.clock = clock
        self._lock = threading.Lock()
        #: uid -> (created, stages still to observe)
        self._tracked: TTLCache[str, tuple[float, frozenset[str]]] = TTLCache(
            maxsize=MAX_TRACKED, ttl=TRACK_SECONDS, timer=monotonic
        )
        self._done: TTLCache[str, bool] = TTLCache(maxsize=MAX_TRACKED, ttl=TRACK_SECONDS, timer=monotonic)

    def pending(self, pod: Mapping[str, Any]) -> None:
        """A pod seen unbound: follow it until it is bound and Ready."""
        meta = pod.get("metadata") or {}
        uid, created = meta.get("uid"), timestamp(meta.get("creationTimestamp"))
        if not uid or created is None:
            return
        with self._lock:
            if uid not in self._tracked and uid not in self._done:
                self._tracked[uid] = (created, frozenset({"bound", "ready"}))

    def on_bound(self, kind: str, pod: Mapping[str, Any]) -> None:
        """A bound pod's listing or watch event: observe the stages it has reached."""
        uid = (pod.get("metadata") or {}).get("uid")
        if not uid:
            return
        with self._lock:
            found = self._tracked.get(uid)
        if found is None:
            return
        if kind == "DELETED":
            self._forget(uid)
            return
        node = (pod.get("spec") or {}).get("nodeName") or ""
        provisioner = self.provisioner_of(node)
        if provisioner is None:  # not on a karpy node: not karpy's to measure
            self._forget(uid)
            return
        created, left = found
        reached = {
            "bound": condition_since(pod, "PodScheduled") or self.clock(),
            "ready": condition_since(pod, "Ready"),
        }
        observed = {stage for stage in left if reached[stage] is not None}
        if not observed:
            return
        with self._lock:
            # The watch thread is the only writer of a pod's entry, but a relist may race a stale event.
            if self._tracked.get(uid) != found:
                return
            remaining = left - observed
            if remaining:
                self._tracked[uid] = (created, remaining)
            else:
                del self._tracked[uid]
                self._done[uid] = True
        if not self.is_leader():  # followers watch too; one replica's histogram counts each pod
            return
        for stage in sorted(observed):
            at = reached[stage]
            assert at is not None
            metrics.PODS_STARTUP.labels(provisioner=provisioner, until=stage).observe(max(at - created, 0.0))

    def _forget(self, uid: str) -> None:
        with self._lock:
            self._tracked.pop(uid, None)

    def tracked(self) -> int:
        with self._lock:
            return len(self._tracked)
