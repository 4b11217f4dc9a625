"""The pod watch: the primary way karpy learns of pods kube-scheduler could not place.

kube-scheduler never calls an extender when its own filters leave no node (or the cluster has
none), so detection follows Karpenter: watch unbound pods, pick the provisionable ones.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kubernetes import client

from extender.cluster import pods as kube_pods
from extender.cluster.informer import run_list_watch
from extender.cluster.objects import pod_key

#: Seconds the server keeps one watch open; reconnects continue from the last resourceVersion.
WATCH_SECONDS = 60


def is_provisionable(pod: Mapping[str, Any]) -> bool:
    """Unbound, marked Unschedulable by kube-scheduler, not preempting, not a DaemonSet or
    static pod, not terminating (Karpenter's IsProvisionable plus the terminating check)."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    if spec.get("nodeName") or meta.get("deletionTimestamp") or status.get("nominatedNodeName"):
        return False
    if status.get("phase") in ("Succeeded", "Failed"):
        return False
    if any(ref.get("kind") in ("DaemonSet", "Node") for ref in meta.get("ownerReferences") or ()):
        return False
    return any(
        c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable"
        for c in status.get("conditions") or ()
    )


class PodWatcher:
    """List, then watch from the list's resourceVersion; re-list on 410 Gone.

    `on_pods(dict key -> manifest)` receives provisionable pods; pods bound or deleted only leave
    `pending()`, the current provisionable set (a batch re-reads its pods anyway).

    The watch thread owns it: `resource_version` and `relists` are written only there; `_pending`
    is read from other threads too, so it is guarded by `_lock`.
    """

    def __init__(
        self,
        kube: client.ApiClient,
        *,
        on_pods: Callable[[dict[str, dict[str, Any]]], None],
        on_synced: Callable[[], None] = lambda: None,
        on_gone: Callable[[str], None] = lambda _key: None,
        on_seen: Callable[[dict[str, Any]], None] = lambda _pod: None,
    ) -> None:
        self.kube = kube
        self.on_pods = on_pods
        self.on_synced = on_synced
        #: Told the key of each pod that left the pending set (deleted, or bound).
        self.on_gone = on_gone
        #: Told of every pending pod the watch sees (added or changed), provisionable or not.
        self.on_seen = on_seen
        self.resource_version = ""
        self.relists = 0
        self._pending: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def pending(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return dict(self._pending)

    def replace(self, items: Iterable[dict[str, Any]], resource_version: str) -> None:
        """A fresh listing: it is the whole pending set, so pods missing from it are gone."""
        self.resource_version = resource_version
        items = list(items)
        for pod in items:
            self.on_seen(pod)
        fresh = {pod_key(p): p for p in items if is_provisionable(p)}
        with self._lock:
            self._pending = fresh
        self.relists += 1
        if fresh:
            self.on_pods(fresh)
        self.on_synced()

    def handle(self, kind: str, pod: dict[str, Any]) -> None:
        if kind == "BOOKMARK":
            self.resource_version = (pod.get("metadata") or {}).get("resourceVersion", self.resource_version)
            return
        self.resource_version = (pod.get("metadata") or {}).get("resourceVersion", self.resource_version)
        key = pod_key(pod)
        if kind != "DELETED":
            self.on_seen(pod)
        if kind != "DELETED" and is_provisionable(pod):
            with self._lock:
                self._pending[key] = pod
            self.on_pods({key: pod})
        else:
            with self._lock:
                self._pending.pop(key, None)
            if kind == "DELETED":
                self.on_gone(key)

    def run(self, stop: threading.Event) -> None:
        run_list_watch(
            client.CoreV1Api(self.kube).list_pod_for_all_namespaces,
            on_list=self.replace,
            on_event=self.handle,
            stop=stop,
            name="pods",
            watch_seconds=WATCH_SECONDS,
            field_selector=kube_pods.PENDING,
        )

    def start(self, stop: threading.Event) -> threading.Thread:
        thread = threading.Thread(target=self.run, args=(stop,), name="pod-watcher", daemon=True)
        thread.start()
        return thread
