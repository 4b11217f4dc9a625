"""The bound-pod index: every live pod bound to a node, as the solver counts it, kept by one watch.

Every batch plans against the whole cluster (topology spread and inter-pod affinity count the pods
already running), and consolidation re-packs karpy's nodes. Listing and parsing every bound pod per
batch held all of them as API JSON at once (about 10 KB each in Python) and took tens of seconds at
50,000 pods. The index lists once, page by page, then follows a watch from the list's
resourceVersion and re-lists on 410 Gone (extender.cluster.informer).

Each pod is parsed once per event and compacted: what replicas share (labels, requests,
tolerations, rules, owner) is one object for all of them, the uid is dropped and of the
annotations only those karpy reads are kept. Per node the index keeps the pods, their count (a pod
karpy cannot parse still counts) and their summed requests, summed again only when the node changed.

The watch thread writes; batches, consolidation and the binder read or assume under `_lock`.
Listeners (the lifecycle's node worker) get every listed pod ("SYNC") and every event, outside it,
as `Pod.from_live` reads it (before compaction).
Without a running watch (unit tests, one-shot use) `current` refreshes the index from a full list.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Hashable, Iterable, Mapping
from functools import partial
from typing import Any, TypeVar

from kubernetes import client
from prometheus_client import Gauge

from extender.api import labels as wk
from extender.api.disruption import DO_NOT_DISRUPT
from extender.api.pod import Pod
from extender.api.resources import Resources
from extender.cluster import inventory, objects
from extender.cluster import pods as kube_pods
from extender.cluster.informer import WatchedIndex
from extender.cluster.inventory import Bound, NodePods

log = logging.getLogger("karpy.informer")

T = TypeVar("T")
Handler = Callable[[str, Pod], None]
ManifestHandler = Callable[[str, Mapping[str, Any]], None]

#: Annotations of a bound pod karpy reads (consolidation's eligibility); the rest are dropped.
KEPT_ANNOTATIONS = frozenset({wk.DO_NOT_EVICT_ANNOTATION, DO_NOT_DISRUPT, wk.MIRROR_POD_ANNOTATION})
#: Interned values beyond the live pods' before the table is rebuilt from the live pods only.
INTERN_SLACK = 10_000

INDEXED = Gauge(
    "karpy_cluster_bound_pods", "Live pods bound to a node, as karpy's bound-pod index holds them."
)


class Interner:
    """One shared object per distinct value: pods of one ReplicaSet carry equal labels, requests
    and rules, and the index keeps one copy. Never mutate what it returns."""

    def __init__(self) -> None:
        self._values: dict[Hashable, Any] = {}

    def __len__(self) -> int:
        return len(self._values)

    def value(self, value: T) -> T:
        try:
            return self._values.setdefault(value, value)
        except TypeError:  # unhashable: kept as it is
            return value

    def mapping(self, value: Mapping[str, str]) -> Mapping[str, str]:
        key = ("mapping", tuple(sorted(value.items())))
        found = self._values.get(key)
        if found is None:
            found = self._values[key] = dict(value)
        return found

    def resources(self, value: Resources) -> Resources:
        key = ("resources", tuple(sorted(value.amounts.items())))
        return self._values.setdefault(key, value)

    def pod(self, pod: Pod, node: str) -> Pod:
        v = self.value
        return dataclasses.replace(
            pod,
            namespace=v(pod.namespace),
            uid="",
            labels=self.mapping(pod.labels),
            annotations=self.mapping({k: a for k, a in pod.annotations.items() if k in KEPT_ANNOTATIONS}),
            requests=self.resources(pod.requests),
            node_selector=self.mapping(pod.node_selector),
            required_terms=v(pod.required_terms),
            preferred_terms=v(pod.preferred_terms),
            tolerations=v(pod.tolerations),
            topology_spread=v(pod.topology_spread),
            pod_affinity=v(pod.pod_affinity),
            pod_anti_affinity=v(pod.pod_anti_affinity),
            preferred_pod_affinity=v(pod.preferred_pod_affinity),
            preferred_pod_anti_affinity=v(pod.preferred_pod_anti_affinity),
            host_ports=v(pod.host_ports),
            volume_terms=v(pod.volume_terms),
            unmodelled=v(pod.unmodelled),
            deferred=v(pod.deferred),
            csi_claims=v(pod.csi_claims),
            claims=v(pod.claims),
            owner_kind=v(pod.owner_kind),
            owner_name=v(pod.owner_name),
            node_name=v(node),
            priority_class_name=v(pod.priority_class_name),
            owner_kinds=v(pod.owner_kinds),
            phase=v(pod.phase),
        )


class _State:
    """The index's contents; a re-list builds a fresh one and swaps it in whole."""

    def __init__(self) -> None:
        #: node -> pod key -> pod (None: a pod karpy cannot parse, counted all the same).
        self.nodes: dict[str, dict[str, Pod | None]] = {}
        #: pod key -> node.
        self.where: dict[str, str] = {}
        #: node -> its NodePods, dropped when the node's pods change.
        self.summaries: dict[str, NodePods] = {}
        self.interner = Interner()

    def put(self, key: str, node: str, pod: Pod | None) -> None:
        previous = self.where.get(key)
        if previous is not None and previous != node:
            self.remove(key)
        self.where[key] = node
        self.nodes.setdefault(node, {})[key] = pod
        self.summaries.pop(node, None)

    def remove(self, key: str) -> None:
        node = self.where.pop(key, None)
        if node is None:
            return
        pods = self.nodes.get(node, {})
        pods.pop(key, None)
        if not pods:
            self.nodes.pop(node, None)
        self.summaries.pop(node, None)

    def summary(self, node: str) -> NodePods:
        found = self.summaries.get(node)
        if found is None:
            on_node = self.nodes.get(node, {})
            pods = tuple(p for p in on_node.values() if p is not None)
            found = NodePods(pods, len(on_node), inventory.pod_requests(pods))
            self.summaries[node] = found
        return found

    def compact(self, pod: Pod | None, node: str) -> Pod | None:
        return None if pod is None else self.interner.pod(pod, node)

    def add(self, pod: Pod) -> None:
        """Index a listed pod (one not bound, or finished, is left out)."""
        if _indexed(pod):
            self.put(pod.key, pod.node_name, self.compact(inventory.readable(pod), pod.node_name))

    def snapshot(self) -> Bound:
        return Bound({node: self.summary(node) for node in self.nodes}, frozenset(self.where))

    def reintern(self) -> None:
        """Forget interned values no live pod holds any more (labels of deleted Jobs' pods...)."""
        fresh = Interner()
        for on_node in self.nodes.values():
            for key, pod in on_node.items():
                if pod is not None:
                    on_node[key] = fresh.pod(pod, pod.node_name)
        self.interner = fresh
        self.summaries.clear()


def _indexed(pod: Pod) -> bool:
    """Live and bound: the index keeps it (as None when its spec is unreadable)."""
    return bool(pod.node_name) and not pod.is_terminal


class BoundPods(WatchedIndex):
    name = "bound pods"

    def __init__(self) -> None:
        super().__init__()
        self._state = _State()
        self._listeners: list[Handler] = []
        self._manifest_listeners: list[ManifestHandler] = []

    def list_function(self, kube: client.ApiClient) -> tuple[Callable[..., Any], dict[str, Any]]:
        return client.CoreV1Api(kube).list_pod_for_all_namespaces, {"field_selector": kube_pods.ASSIGNED}

    def subscribe(self, handler: Handler) -> None:
        """`handler(event, pod)` for every listed pod ("SYNC") and watch event."""
        self._listeners.append(handler)

    def subscribe_manifests(self, handler: ManifestHandler) -> None:
        """`handler(event, API JSON)` for every listed pod ("SYNC") and ADDED/MODIFIED/DELETED event
        (pod startup reads its conditions, which `Pod` does not keep)."""
        self._manifest_listeners.append(handler)

    # --- the watch side ---------------------------------------------------------------------------

    def replace(self, items: Iterable[Mapping[str, Any]], resource_version: str) -> None:
        """A (re)listing is the whole set: built aside as its pages stream in, then swapped in."""
        fresh = _State()
        for manifest in items:
            pod = Pod.from_live(manifest)
            fresh.add(pod)
            self._notify("SYNC", pod, manifest)
        with self._lock:
            vanished = {key: node for key, node in self._state.where.items() if key not in fresh.where}
            self._state = fresh
            self.resource_version = resource_version
            self.relists += 1
            INDEXED.set(len(fresh.where))
        # Deleted while the watch was down: listeners hear it as informers say it (client-go's
        # DeletedFinalStateUnknown), or a node emptied meanwhile waits for the next resync.
        for key, node in vanished.items():
            namespace, _, name = key.partition("/")
            self._notify("DELETED", Pod(namespace, name, node_name=node))
        self.synced.set()

    def apply(self, kind: str, manifest: Mapping[str, Any]) -> None:
        """One watch event: ADDED/MODIFIED put the pod (or drop it once it finished), DELETED drops it."""
        version = objects.resource_version(manifest) or self.resource_version
        if kind == "BOOKMARK":
            self.resource_version = version
            return
        pod = Pod.from_live(manifest)
        with self._lock:
            state = self._state
            if kind == "DELETED" or not _indexed(pod):
                state.remove(pod.key)
            else:
                state.add(pod)
            if len(state.interner) > 4 * len(state.where) + INTERN_SLACK:
                state.reintern()
            self.resource_version = version
            INDEXED.set(len(state.where))
        self._notify(kind, pod, manifest)

    def assume(self, pod: Pod, node: str) -> None:
        """`pod` was just bound to `node` by karpy: count it now, before its watch event arrives,
        so the next batch does not plan into the room it took (the event then replaces it)."""
        with self._lock:
            state = self._state
            state.put(pod.key, node, state.compact(pod, node))
            INDEXED.set(len(state.where))

    def _notify(self, kind: str, pod: Pod, manifest: Mapping[str, Any] | None = None) -> None:
        calls: list[Callable[[], None]] = [partial(handler, kind, pod) for handler in self._listeners]
        if manifest is not None:
            calls += [partial(handler, kind, manifest) for handler in self._manifest_listeners]
        for call in calls:
            try:
                call()
            except Exception:  # a listener's fault must not stop the index
                log.exception("Handling %s of pod %s", kind, pod.key)

    # --- the read side ----------------------------------------------------------------------------

    def snapshot(self) -> Bound:
        with self._lock:
            return self._state.snapshot()

    def current(self, list_now: Callable[[], Iterable[Mapping[str, Any]]]) -> Bound:
        """The index as the watch keeps it (waiting for its first listing), or, without a running
        watch, refreshed from `list_now()` first."""
        self.wait_synced(list_now)
        return self.snapshot()


def group(manifests: Iterable[Mapping[str, Any]]) -> Bound:
    """The live bound pods among `manifests`, by node (one-shot callers: `karpy plan`, tests)."""
    state = _State()
    for manifest in manifests:
        state.add(Pod.from_live(manifest))
    return state.snapshot()
