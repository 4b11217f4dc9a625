"""ClusterState: what the extender's guard and prioritize read, shared in-process and thread-safe.

Lifecycle writes removal marks (each with the node's disrupted taint, lifecycle/context.py);
provisioning writes claims (pods it is placing), the nodes the running batch binds to, reservations
(capacity promised to pods it is binding, and holds: room kept on a node launched for a pod
kube-scheduler binds, until it does or a deadline passes) and the node cache it rebuilds every
batch. Every read is a dict lookup: /filter runs in kube-scheduler's serialized scheduling loop.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from extender.api.pod import Pod
from extender.api.resources import Resources


@dataclass(frozen=True)
class NodeInfo:
    """The guard's view of one of karpy's nodes, built from the api's Node by the inventory."""

    name: str
    provisioner: str
    labels: Mapping[str, str] = field(default_factory=dict)
    allocatable: Resources = field(default_factory=Resources)
    #: Sum of the requests of pods bound to the node when karpy last looked.
    requested: Resources = field(default_factory=Resources)
    created: float = 0.0
    ready: bool = False


@dataclass(frozen=True)
class Hold:
    """Room reserved on `node` for `pod`, which kube-scheduler binds (`Pod.deferred`), until the
    clock reads `until`."""

    node: str
    pod: Pod
    until: float


class ClusterState:
    """Owner: the `karpy controller` process (one per process, handed to every worker). `_lock`
    guards the node cache, marks, reservations and claims; `_ready` is an Event of its own."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._nodes: dict[str, NodeInfo] = {}
        self._marks: dict[str, str] = {}
        #: node -> pod key -> requests: binds in flight and holds.
        self._reserved: dict[str, dict[str, Resources]] = {}
        #: pod key -> its hold (its requests are in `_reserved` too).
        self._holds: dict[str, Hold] = {}
        self._claims: dict[str, int] = {}
        #: Nodes the running batch launched and binds to (at most one batch runs at a time).
        self._binding: frozenset[str] = frozenset()
        self._ready = threading.Event()

    # -- node cache ------------------------------------------------------------------------------

    def set_nodes(self, nodes: Iterable[NodeInfo]) -> None:
        fresh = {n.name: n for n in nodes}
        with self._lock:
            self._nodes = fresh

    def upsert_node(self, node: NodeInfo) -> None:
        with self._lock:
            self._nodes = {**self._nodes, node.name: node}

    def node(self, name: str) -> NodeInfo | None:
        return self._nodes.get(name)

    def nodes(self) -> dict[str, NodeInfo]:
        return dict(self._nodes)

    # -- removal marks (lifecycle) ---------------------------------------------------------------

    def mark_for_removal(self, node: str, reason: str) -> bool:
        """True when the node was not marked before (its taint is then the caller's to add)."""
        with self._lock:
            new = node not in self._marks
            self._marks[node] = reason
        return new

    def unmark(self, node: str) -> bool:
        """True when the node was marked."""
        with self._lock:
            return self._marks.pop(node, None) is not None

    def removal_reason(self, node: str) -> str | None:
        return self._marks.get(node)

    def marked(self) -> dict[str, str]:
        with self._lock:
            return dict(self._marks)

    # -- reservations (provisioning) -------------------------------------------------------------

    def reserve(self, node: str, pods: Mapping[str, Resources]) -> None:
        """Promise `node` capacity for these pods (key -> requests) until `release`."""
        with self._lock:
            self._reserved.setdefault(node, {}).update(pods)

    def release(self, node: str, pod_keys: Iterable[str]) -> None:
        with self._lock:
            self._release(node, pod_keys)

    def _release(self, node: str, pod_keys: Iterable[str]) -> None:
        held = self._reserved.get(node)
        if held is None:
            return
        for key in pod_keys:
            held.pop(key, None)
        if not held:
            del self._reserved[node]

    def reservation(self, node: str, excluding: str = "") -> tuple[int, Resources]:
        """(pod count, summed requests) reserved on the node, less the pod `excluding`'s own
        room; (0, empty) when none."""
        held = self._reserved.get(node)
        if not held:
            return 0, Resources()
        with self._lock:
            values = [value for key, value in held.items() if key != excluding]
        total = Resources()
        for value in values:
            total = total + value
        return len(values), total

    def reserved_nodes(self) -> frozenset[str]:
        """Nodes holding reservations now (a snapshot; usually empty, so the guard's loop is cheap)."""
        with self._lock:
            return frozenset(self._reserved)

    # -- holds (provisioning): room for pods kube-scheduler binds ------------------------------------

    def hold(self, node: str, pods: Sequence[Pod], until: float) -> None:
        """Reserve `node`'s room for `pods` until `until` (a pod held elsewhere moves here)."""
        with self._lock:
            for pod in pods:
                previous = self._holds.get(pod.key)
                if previous is not None:
                    self._release(previous.node, [pod.key])
                self._reserved.setdefault(node, {})[pod.key] = pod.requests
                self._holds[pod.key] = Hold(node, pod, until)

    def held(self, pod_key: str) -> Hold | None:
        return self._holds.get(pod_key)

    def holds(self) -> list[Hold]:
        with self._lock:
            return list(self._holds.values())

    def unhold(self, pod_key: str) -> Hold | None:
        """Release the pod's hold; the hold, or None when it had none."""
        if pod_key not in self._holds:
            return None
        with self._lock:
            hold = self._holds.pop(pod_key, None)
            if hold is not None:
                self._release(hold.node, [pod_key])
        return hold

    def expire(self, now: float) -> list[Hold]:
        """Release and return the holds whose deadline has passed."""
        with self._lock:
            due = [hold for hold in self._holds.values() if hold.until <= now]
            for hold in due:
                del self._holds[hold.pod.key]
                self._release(hold.node, [hold.pod.key])
        return due

    def next_expiry(self) -> float | None:
        with self._lock:
            return min((hold.until for hold in self._holds.values()), default=None)

    # -- claims (provisioning) -------------------------------------------------------------------

    def claim(self, pod_keys: Iterable[str]) -> None:
        """Pods karpy is planning, launching and binding for: kube-scheduler must not place them
        meanwhile, or the node launched for them comes up empty. Counted, so a claim released
        while another still holds the pod leaves it claimed."""
        with self._lock:
            for key in pod_keys:
                self._claims[key] = self._claims.get(key, 0) + 1

    def unclaim(self, pod_keys: Iterable[str]) -> None:
        with self._lock:
            for key in pod_keys:
                left = self._claims.get(key, 0) - 1
                if left > 0:
                    self._claims[key] = left
                else:
                    self._claims.pop(key, None)

    def claimed(self, pod_key: str) -> bool:
        return pod_key in self._claims

    def binding_to(self, node: str) -> None:
        """The running batch launched `node` and binds its pods there: readiness keeps the node's
        not-ready taint until `batch_done`, so kube-scheduler, which in the shipped configuration
        does not ask karpy about ordinary pods (docs/scheduler-path.md), places nothing on the
        batch's nodes before karpy's binds."""
        with self._lock:
            self._binding = self._binding | {node}

    def batch_done(self) -> None:
        with self._lock:
            self._binding = frozenset()

    def binding(self, node: str) -> bool:
        return node in self._binding

    # -- readiness -------------------------------------------------------------------------------

    def set_ready(self) -> None:
        self._ready.set()

    @property
    def ready(self) -> bool:
        return self._ready.is_set()
