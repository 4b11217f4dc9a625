"""karpy's nodes as the solver and the extender see them: ExistingNode capacity for in-flight and
live nodes, per-Provisioner usage for limits, and the NodeInfo cache of ClusterState.

Pure functions over API JSON (Nodes and the pods bound to them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from extender.api import labels as wk
from extender.api.pod import Pod, PodError
from extender.api.provisioner import Taint
from extender.api.resources import CPU, MEMORY, Resources
from extender.cluster import objects
from extender.scheduling.plan import ExistingNode
from extender.state import NodeInfo


@dataclass
class Inventory:
    existing: list[ExistingNode] = field(default_factory=list)
    #: Provisioner -> cpu/memory capacity of its nodes, live and in flight (limits count both).
    usage: dict[str, Resources] = field(default_factory=dict)
    nodes: list[NodeInfo] = field(default_factory=list)
    #: Keys of the pods bound to these nodes: a pod listed pending moments ago may be among them.
    assigned: frozenset[str] = frozenset()


def pod_requests(pods: Iterable[Mapping[str, Any]]) -> Resources:
    total = Resources()
    for manifest in pods:
        try:
            total = total + Pod.from_manifest(manifest).requests
        except PodError:
            continue
    return total


def build(
    nodes: Iterable[Mapping[str, Any]],
    pods_by_node: Mapping[str, list[Mapping[str, Any]]],
    marked: Mapping[str, str],
) -> Inventory:
    result = Inventory(
        assigned=frozenset(objects.pod_key(p) for bound in pods_by_node.values() for p in bound)
    )
    for node in nodes:
        meta = node.get("metadata") or {}
        spec = node.get("spec") or {}
        status = node.get("status") or {}
        name = meta.get("name", "")
        node_labels = meta.get("labels") or {}
        provisioner = node_labels.get(wk.PROVISIONER_NAME, "")
        capacity = Resources.parse(status.get("capacity"))
        allocatable = Resources.parse(status.get("allocatable"))
        result.usage[provisioner] = result.usage.get(provisioner, Resources()) + Resources(
            {CPU: capacity.cpu, MEMORY: capacity.memory}
        )
        on_node = pods_by_node.get(name, [])
        requested = pod_requests(on_node)
        ready = objects.is_ready(node)
        result.nodes.append(
            NodeInfo(
                name=name,
                provisioner=provisioner,
                labels=node_labels,
                allocatable=allocatable,
                requested=requested,
                ready=ready,
            )
        )
        if name in marked or meta.get("deletionTimestamp") or spec.get("unschedulable"):
            continue
        # karpy binds past its own not-ready taint (that taint only keeps kube-scheduler away).
        taints = tuple(
            Taint(key=t.get("key", ""), value=t.get("value", ""), effect=t.get("effect", ""))
            for t in spec.get("taints") or ()
            if t.get("key") != wk.NOT_READY_TAINT_KEY
        )
        result.existing.append(
            ExistingNode(
                name=name,
                provisioner=provisioner,
                instance_type=node_labels.get(wk.INSTANCE_TYPE, ""),
                labels=node_labels,
                taints=taints,
                allocatable=allocatable,
                requested=requested,
                pod_count=len(on_node),
            )
        )
    return result
