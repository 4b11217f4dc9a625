"""From planned nodes to cloud launches and Node objects.

Planned nodes with the same Provisioner, option list, zones, capacity types, labels and taints are
one LaunchRequest with `count` (one CreateFleet); each launched instance becomes a Node that the
planned node's pods are then bound to.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from extender.api import labels as wk
from extender.api.provisioner import Provisioner, Taint
from extender.cloud.types import Instance, LaunchRequest
from extender.cluster.nodes import node_manifest
from extender.scheduling.instancetypes import InstanceType
from extender.scheduling.plan import PlannedNode

NOT_READY = Taint(key=wk.NOT_READY_TAINT_KEY, effect="NoSchedule")


@dataclass(frozen=True)
class LaunchGroup:
    request: LaunchRequest
    nodes: tuple[PlannedNode, ...]


def _group_key(node: PlannedNode) -> tuple:
    return (
        node.provisioner,
        tuple(t.name for t in node.options),
        tuple(node.zones),
        tuple(node.capacity_types),
        tuple(sorted(node.labels.items())),
        node.taints,
    )


def group(nodes: Sequence[PlannedNode], provisioners: Mapping[str, Provisioner]) -> list[LaunchGroup]:
    grouped: dict[tuple, list[PlannedNode]] = {}
    for node in nodes:
        grouped.setdefault(_group_key(node), []).append(node)
    result = []
    for members in grouped.values():
        first = members[0]
        result.append(
            LaunchGroup(
                request=LaunchRequest(
                    provisioner=provisioners[first.provisioner],
                    instance_types=tuple(t.name for t in first.options),
                    zones=tuple(first.zones),
                    capacity_types=tuple(first.capacity_types),
                    count=len(members),
                    labels=dict(first.labels),
                    taints=tuple(first.taints),
                    launch_id=uuid.uuid4().hex,
                ),
                nodes=tuple(members),
            )
        )
    return result


def instance_type_of(instance: Instance, planned: PlannedNode) -> InstanceType:
    """The catalog entry of the type EC2 chose; options are cheapest first, so any may have won."""
    return next((t for t in planned.options if t.name == instance.instance_type), planned.options[0])


def node_for(instance: Instance, planned: PlannedNode, provisioner: Provisioner) -> dict[str, Any]:
    """The Node object of a launched instance (Karpenter 0.5's instanceToNode)."""
    itype = instance_type_of(instance, planned)
    node_labels = {
        **provisioner.labels,
        **planned.labels,
        **itype.labels(),
        wk.ZONE: instance.zone,
        wk.CAPACITY_TYPE: instance.capacity_type,
        wk.PROVISIONER_NAME: provisioner.name,
        wk.MANAGED_BY_LABEL: "true",
    }
    taints = (*provisioner.taints, *(t for t in planned.taints if t not in provisioner.taints), NOT_READY)
    return node_manifest(
        name=instance.private_dns_name.lower() or instance.id,
        provider_id=instance.provider_id or f"aws:///{instance.zone}/{instance.id}",
        labels=node_labels,
        taints=taints,
        capacity=itype.capacity,
        allocatable=itype.allocatable,
        arch=itype.arch,
        os=itype.os,
    )
