"""The cluster as the solver and the extender see it: every node with the pods bound to it
(ExistingNode; karpy places pods only on its own live and in-flight nodes, the others bring their
topology domains and pods), per-Provisioner usage for limits (karpy's nodes only), and the
NodeInfo cache of ClusterState (karpy's nodes).

Pure functions over Node models (parsed by the cluster adapter) and the pods bound to them
(`Bound`, the bound-pod index's snapshot, extender/cluster/boundpods.py); `parse_pod` is the one
place provisioning parses a pod (bound pods in the index, pending and DaemonSet pods in `gather`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from extender.api import labels as wk
from extender.api.node import Node
from extender.api.pod import Pod, VolumeTopology
from extender.api.provisioner import Taint
from extender.api.resources import NODES, Resources
from extender.scheduling.plan import ExistingNode
from extender.state import NodeInfo

log = logging.getLogger("karpy.controller.provisioning")

#: Taints a node carries while it starts, which karpy binds past on its own nodes: karpy's
#: not-ready taint (it only keeps kube-scheduler away), the not-ready taint the apiserver's
#: TaintNodesByCondition puts on every new Node until its kubelet reports Ready, and the rest of
#: Karpenter's KnownEphemeralTaints (unreachable, cloud provider uninitialized).
EPHEMERAL_TAINTS = frozenset(
    {
        ("node.kubernetes.io/not-ready", "NoSchedule"),
        ("node.kubernetes.io/unreachable", "NoSchedule"),
        ("node.cloudprovider.kubernetes.io/uninitialized", "NoSchedule"),
    }
)


def ephemeral(taint: Taint) -> bool:
    return taint.key == wk.NOT_READY_TAINT_KEY or (taint.key, taint.effect) in EPHEMERAL_TAINTS


@dataclass
class Inventory:
    #: Every node of the cluster; `schedulable` only for karpy's nodes that can still take pods.
    existing: list[ExistingNode] = field(default_factory=list)
    #: Provisioner -> cpu/memory capacity of its nodes, live and in flight (limits count both).
    usage: dict[str, Resources] = field(default_factory=dict)
    nodes: list[NodeInfo] = field(default_factory=list)
    #: Keys of the pods bound to any node: a pod listed pending moments ago may be among them.
    assigned: frozenset[str] = frozenset()
    #: Namespace -> labels (namespaceSelector of pod affinity terms); None when unknown.
    namespaces: Mapping[str, Mapping[str, str]] | None = None


def parse_pod(manifest: Mapping[str, Any], volumes: VolumeTopology | None = None) -> Pod:
    """The one place provisioning turns a pod's API JSON into the api model; raises PodError.
    `volumes` is what the pod's claims need of a node (pending pods only: bound ones are placed)."""
    return Pod.from_manifest(manifest, volumes)


def parse_or_none(manifest: Mapping[str, Any]) -> Pod | None:
    """`parse_pod`, or None (logged) for a pod karpy cannot read."""
    return readable(Pod.from_live(manifest))


def readable(pod: Pod) -> Pod | None:
    """`pod`, or None (logged) when its spec could not be read (`Pod.from_live`): it runs, and
    counts, but karpy cannot plan with it."""
    if pod.unreadable:
        log.debug("Ignoring pod %s, %s", pod.key, pod.unreadable)
        return None
    return pod


@dataclass(frozen=True)
class NodePods:
    """The live pods bound to one node."""

    pods: tuple[Pod, ...] = ()
    #: Every live pod, those karpy cannot parse included (they still take a pod slot).
    count: int = 0
    requested: Resources = field(default_factory=Resources)


@dataclass(frozen=True)
class Bound:
    """Every live pod bound to a node: node -> its pods, and the keys of all of them (the bound-pod
    index's snapshot, extender/cluster/boundpods.py)."""

    by_node: Mapping[str, NodePods] = field(default_factory=dict)
    keys: frozenset[str] = frozenset()

    def on(self, node: str) -> NodePods:
        return self.by_node.get(node) or NodePods()


def parse_pods(manifests: Iterable[Mapping[str, Any]]) -> list[Pod]:
    """The live (non-terminal) pods of a node as the solver counts them; a pod karpy cannot parse
    still runs, but brings no requests or labels it could read."""
    return [pod for pod in live_pods(manifests) if readable(pod) is not None]


def live_pods(manifests: Iterable[Mapping[str, Any]]) -> list[Pod]:
    """The non-terminal pods among `manifests`, those karpy cannot read included (`Pod.from_live`)."""
    return [pod for pod in map(Pod.from_live, manifests) if not pod.is_terminal]


def pod_requests(pods: Iterable[Pod]) -> Resources:
    total = Resources()
    for pod in pods:
        total = total + pod.requests
    return total


#: What each node adds to its Provisioner's `nodes` (limits.nodes).
ONE_NODE = Resources({NODES: 1})


def usage(nodes: Iterable[Node]) -> dict[str, Resources]:
    """Provisioner -> the summed capacity of its live and in-flight nodes (karpy's nodes only; others
    count for no limit), every resource a limit may name, `nodes` (their count) included."""
    result: dict[str, Resources] = {}
    for node in nodes:
        if node.provisioner is None:
            continue
        result[node.provisioner] = result.get(node.provisioner, Resources()) + node.capacity + ONE_NODE
    return result


def takes_pods(node: Node, marked: Mapping[str, str]) -> bool:
    """A karpy node karpy may still place pods on: not marked for removal, deleting or cordoned."""
    return node.is_karpy and node.name not in marked and not node.deleting and not node.unschedulable


def existing_node(
    node: Node, pods: NodePods, *, schedulable: bool, volumes: Attachments | None = None
) -> ExistingNode:
    """The solver's view of one Node with `pods` bound to it (a karpy node's start-up taints, its
    NodePool's startupTaints among them, left out: Karpenter's StateNode.Taints of a node not yet
    initialized); `volumes`: its CSI attach limits and the volumes its pods hold."""
    limits, in_use = volumes or ((), ())
    startup = node.startup_taints if node.is_karpy else ()
    return ExistingNode(
        name=node.name,
        provisioner=node.provisioner or "",
        instance_type=node.labels.get(wk.INSTANCE_TYPE, ""),
        labels=dict(node.labels),
        taints=tuple(t for t in node.taints if not (node.is_karpy and ephemeral(t)) and t not in startup),
        allocatable=node.allocatable,
        requested=pods.requested,
        pod_count=pods.count,
        pods=pods.pods,
        schedulable=schedulable,
        volume_limits=limits,
        volumes_in_use=in_use,
    )


#: A node's (CSI driver, attach limit) and (CSI driver, volumes its pods hold).
Attachments = tuple[tuple[tuple[str, int], ...], tuple[tuple[str, int], ...]]
#: Counts the distinct CSI volumes, per driver, that a node's pods hold.
VolumeCounter = Callable[[Iterable[Pod]], tuple[tuple[str, int], ...]]


def node_pods(manifests: Sequence[Mapping[str, Any]]) -> NodePods:
    """One node's pods from API JSON (read right before binding, or from a file)."""
    live = live_pods(manifests)
    pods = tuple(pod for pod in live if readable(pod) is not None)
    return NodePods(pods, len(live), pod_requests(pods))


def with_held(pods: NodePods, held: Sequence[Pod], bound: frozenset[str]) -> NodePods:
    """A node's pods plus those whose room is held on it for kube-scheduler to bind (not bound
    yet): the solver plans around that room and counts those pods' labels."""
    extra = [p for p in held if p.key not in bound]
    if not extra:
        return pods
    return NodePods((*pods.pods, *extra), pods.count + len(extra), pods.requested + pod_requests(extra))


def build(
    nodes: Iterable[Node],
    bound: Bound,
    marked: Mapping[str, str],
    namespaces: Mapping[str, Mapping[str, str]] | None = None,
    held: Mapping[str, Sequence[Pod]] | None = None,
    attach_limits: Mapping[str, tuple[tuple[str, int], ...]] | None = None,
    count_volumes: VolumeCounter | None = None,
) -> Inventory:
    """`nodes`: every Node of the cluster; `bound`: the pods bound to them (pods of nodes not
    among `nodes` are left out); `held`: node -> pods whose room is held there (ClusterState's
    holds); `attach_limits`: node -> its CSINode limits, with `count_volumes` counting what its pods
    hold (only needed when pending pods have CSI volumes). The guard's NodeInfo counts bound pods
    only: it subtracts reservations itself."""
    nodes = list(nodes)
    result = Inventory(usage=usage(nodes), assigned=bound.keys, namespaces=namespaces)
    for node in nodes:
        on_node = bound.on(node.name)
        planned = with_held(on_node, (held or {}).get(node.name, ()), bound.keys)
        limits = (attach_limits or {}).get(node.name, ())
        volumes = (limits, count_volumes(planned.pods)) if limits and count_volumes else None
        solver_node = existing_node(node, planned, schedulable=takes_pods(node, marked), volumes=volumes)
        result.existing.append(solver_node)
        if node.is_karpy:
            result.nodes.append(
                NodeInfo(
                    name=node.name,
                    provisioner=solver_node.provisioner,
                    labels=solver_node.labels,
                    allocatable=solver_node.allocatable,
                    requested=on_node.requested,
                    ready=node.ready,
                )
            )
    return result
