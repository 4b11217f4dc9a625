"""When each node last saw a pod event: what v1's `consolidateAfter` waits on.

Karpenter v1 stamps `NodeClaim.status.lastPodEventTime` when a pod is bound to the node, goes
terminal or starts terminating (pkg/controllers/nodeclaim/podevents: its update predicate), DaemonSet
pods aside; a node is Consolidatable once that time (or its initialization, with no event yet) is
`consolidateAfter` old (nodeclaim/disruption/consolidation.go). karpy keeps the same times in
memory from the bound-pod index's events; a node with no event since this replica started counts
from when consolidation first asked about it, so a restart or a leadership change restarts the wait
(conservative: it never consolidates sooner than Karpenter would).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from datetime import datetime

from extender.api.pod import Pod


class PodEvents:
    def __init__(self, clock: Callable[[], datetime]) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        #: pod key -> (node, terminal, terminating) as last heard.
        self._pods: dict[str, tuple[str, bool, bool]] = {}
        self._last: dict[str, datetime] = {}

    def observe(self, event: str, pod: Pod) -> None:
        """One event of the bound-pod index. SYNC (a listing) records state without an event."""
        if pod.is_daemonset or not pod.node_name:
            return
        with self._lock:
            before = self._pods.get(pod.key)
            if event == "DELETED":
                self._pods.pop(pod.key, None)
            else:
                self._pods[pod.key] = (pod.node_name, pod.is_terminal, pod.deleting)
            if event == "SYNC" and before is None:
                return
            if event != "DELETED" and before == self._pods[pod.key]:
                return  # a status update that changes nothing the predicate watches
            self._last[pod.node_name] = self._clock()

    def last(self, nodes: Iterable[str]) -> dict[str, datetime]:
        """node -> its last pod event, or when it was first asked about (recorded now)."""
        now = self._clock()
        with self._lock:
            return {name: self._last.setdefault(name, now) for name in nodes}

    def forget(self, node: str) -> None:
        with self._lock:
            self._last.pop(node, None)
