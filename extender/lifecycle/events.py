"""Kubernetes Events the lifecycle publishes, deduplicated so a blocked drain does not spam.

Reasons follow Karpenter: FailedDraining, SpotInterrupted, SpotRebalanceRecommendation,
InstanceStopping, InstanceTerminating, InstanceScheduledChange. Written through
extender.cluster.events.record.
"""

from __future__ import annotations

import threading
from typing import Any

from cachetools import TTLCache

from extender.api.node import Node
from extender.api.pod import Pod
from extender.cluster import events


class Recorder:
    def __init__(self, kube: Any | None, *, dedupe_seconds: float = 120.0) -> None:
        self._kube = kube
        self._seen: TTLCache[tuple[str, ...], bool] = TTLCache(maxsize=4096, ttl=dedupe_seconds)
        self._lock = threading.Lock()
        #: (object name, reason, message) of every event published, newest last (bounded).
        self.published: list[tuple[str, str, str]] = []

    def node(
        self, node: Node, reason: str, message: str, *, warning: bool = False, dedupe: bool = True
    ) -> None:
        """`dedupe=False`: the caller publishes only on a change, so a change back to an earlier
        message within the dedupe window is news too."""
        self._publish(node.name, node.uid, "Node", "", reason, message, warning, dedupe)

    def pod(self, pod: Pod, reason: str, message: str, *, warning: bool = False) -> None:
        self._publish(pod.name, pod.uid, "Pod", pod.namespace, reason, message, warning)

    def _publish(
        self,
        name: str,
        uid: str,
        kind: str,
        namespace: str,
        reason: str,
        message: str,
        warning: bool,
        dedupe: bool = True,
    ) -> None:
        key = (kind, namespace, name, reason, message)
        with self._lock:
            if dedupe and key in self._seen:
                return
            self._seen[key] = True
            self.published = [*self.published[-999:], (name, reason, message)]
        if self._kube is not None:
            events.record(
                self._kube,
                kind=kind,
                name=name,
                namespace=namespace,
                uid=uid,
                reason=reason,
                message=message,
                warning=warning,
            )
