"""From planned nodes to cloud launches and Node objects.

Planned nodes with the same Provisioner, option list, zones, capacity types, labels and taints are
one LaunchRequest with `count` (one CreateFleet); each launched instance becomes a Node that the
planned node's pods are then bound to.

A group's launch id is derived from what it launches for, not drawn at random: a controller killed
after CreateFleet re-plans the same pods on restart, gets the same id, and the cloud provider finds
the instances already tagged with it instead of launching them again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from extender.api import labels as wk
from extender.api.node import Node, format_taints
from extender.api.nodeclass import AMI_ID_ANNOTATION
from extender.api.provisioner import Provisioner, Taint
from extender.api.provisioner_hash import hash_annotations
from extender.api.resources import EFA, Resources
from extender.cloud.types import Instance, LaunchRequest
from extender.cluster.nodes import instance_id, node_manifest
from extender.scheduling.instancetypes import InstanceType, NodeSettings
from extender.scheduling.plan import PlannedNode
from extender.scheduling.requirements import Requirements

NOT_READY = Taint(key=wk.NOT_READY_TAINT_KEY, effect="NoSchedule")


@dataclass(frozen=True)
class LaunchGroup:
    request: LaunchRequest
    nodes: tuple[PlannedNode, ...]


def _group_key(node: PlannedNode) -> tuple[object, ...]:
    return (
        node.provisioner,
        tuple(t.name for t in node.options),
        tuple(node.zones),
        tuple(node.capacity_types),
        tuple(sorted(node.labels.items())),
        node.taints,
        wants_efa(node),
        node.reservation_id,
    )


def wants_efa(node: PlannedNode) -> bool:
    """Its pods request EFA: the node is launched with the type's EFA interfaces (Karpenter's
    launch template EFACount is the type's EFA capacity when the NodeClaim requests any)."""
    return node.requests.get(EFA) > 0


def launch_id(nodes: Sequence[PlannedNode], attempt: int, retries: Mapping[str, int] | None = None) -> str:
    """Same pods, Provisioner, request and attempt -> same id (the EC2 ClientToken, at most 64 chars).

    EC2 rejects a ClientToken reused with different parameters (IdempotentParameterMismatch), so
    the options, zones and capacity types are part of the key, and so is the re-plan attempt, whose
    request leaves out the offerings EC2 just refused. Each pod's current node is too: replacements
    for a node's bound pods are a different launch from the one that brought that node up for the
    same pods while they were pending. `retries` (pod key -> times the re-check before binding
    refused it) is too: an instance found by its launch id may have become a node that other pods
    filled since (adopted after a crash), and planning the refused pod again must launch anew.
    """
    retries = retries or {}
    first = nodes[0]
    key = "\n".join(
        [
            first.provisioner,
            str(attempt),
            ",".join(t.name for t in first.options),
            ",".join(first.zones),
            ",".join(first.capacity_types),
            *([first.reservation_id] if first.reservation_id else []),
            *sorted(
                f"{p.uid}@{p.node_name}" + (f"#{retries[p.key]}" if retries.get(p.key) else "")
                for node in nodes
                for p in node.pods
            ),
        ]
    )
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def group(
    nodes: Sequence[PlannedNode],
    provisioners: Mapping[str, Provisioner],
    attempt: int = 0,
    retries: Mapping[str, int] | None = None,
) -> list[LaunchGroup]:
    grouped: dict[tuple[object, ...], list[PlannedNode]] = {}
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
                    launch_id=launch_id(members, attempt, retries),
                    efa=wants_efa(first),
                    capacity_reservation_id=first.reservation_id,
                ),
                nodes=tuple(members),
            )
        )
    return result


def instance_type_of(instance: Instance, planned: PlannedNode) -> InstanceType:
    """The catalog entry of the type EC2 chose; options are cheapest first, so any may have won."""
    return next((t for t in planned.options if t.name == instance.instance_type), planned.options[0])


def node_for(
    instance: Instance, planned: PlannedNode, provisioner: Provisioner, *, region: str = ""
) -> dict[str, Any]:
    """The Node object of a launched instance (Karpenter 0.5's instanceToNode)."""
    itype = instance_type_of(instance, planned)
    efa = int(itype.extended.get(EFA)) if wants_efa(planned) else 0
    return _node(instance, itype, provisioner, planned.labels, planned.taints, region, efa=efa)


def adopted_node(
    instance: Instance, itype: InstanceType, provisioner: Provisioner, *, region: str = ""
) -> dict[str, Any]:
    """The Node of an instance whose launch was interrupted before its Node was written.

    The plan's labels are gone with the crashed controller; the Provisioner's own single-valued
    requirements give the same labels for everything but the pods' extra requirements.
    """
    single = Requirements.from_requirements(provisioner.requirements).single_values()
    # The catalog entry, under the Provisioner's node settings as the plan had it.
    itype = itype.for_node(NodeSettings.of(provisioner.kubelet, provisioner.provider))
    # The EFA interfaces EC2 says it has (its launch template's), not the type's most.
    efa = instance.efa_interfaces
    return _node(instance, itype, provisioner, single, provisioner.taints, region, efa=efa)


#: GA key -> the deprecated alias kubelet and the cloud providers still set beside it, so a
#: topologyKey or selector written with the old name sees karpy's nodes as it sees theirs.
DEPRECATED_ALIASES = {ga: old for old, ga in wk.DEPRECATED_LABELS.items() if old != wk.CAPACITY_TYPE_ALIAS}


def with_deprecated_aliases(labels: Mapping[str, str]) -> dict[str, str]:
    """`labels` plus beta.kubernetes.io/{arch,os,instance-type} and
    failure-domain.beta.kubernetes.io/{zone,region} for the GA keys present."""
    return {
        **labels,
        **{old: labels[ga] for ga, old in DEPRECATED_ALIASES.items() if labels.get(ga)},
    }


def launched_image(instance: Instance) -> dict[str, str]:
    """The annotation recording the AMI the instance booted from: what drift compares with the
    AMI its Provisioner resolves to now (CloudProvider.image_id)."""
    return {AMI_ID_ANNOTATION: instance.image_id} if instance.image_id else {}


def startup_annotation(provisioner: Provisioner) -> dict[str, str]:
    """The record of the NodePool's startup taints on its node (labels.STARTUP_TAINTS_ANNOTATION)."""
    if not provisioner.startup_taints:
        return {}
    return {wk.STARTUP_TAINTS_ANNOTATION: format_taints(provisioner.startup_taints)}


def _node(
    instance: Instance,
    itype: InstanceType,
    provisioner: Provisioner,
    labels: Mapping[str, str],
    planned_taints: Sequence[Taint],
    region: str = "",
    *,
    efa: int = 0,
) -> dict[str, Any]:
    """`efa`: the EFA interfaces the instance was launched with, what the EFA device plugin will
    report; the Node advertises that many, never the type's most (Karpenter's resourceFilter)."""
    node_labels = {
        **provisioner.labels,
        **labels,
        **itype.labels(),
        wk.ZONE: instance.zone,
        wk.CAPACITY_TYPE: instance.capacity_type,
        # Only a reserved node has them (Karpenter's instanceToNodeClaim).
        **instance.reservation_labels,
        provisioner.owner_label: provisioner.name,
        wk.MANAGED_BY_LABEL: "true",
    }
    if region:
        node_labels[wk.REGION] = region
    node_labels = with_deprecated_aliases(node_labels)
    taints = (*provisioner.taints, *(t for t in planned_taints if t not in provisioner.taints))
    # Startup taints go on the node too (Karpenter's registration), but were not planned: pods
    # need not tolerate them.
    taints = (*taints, *(t for t in provisioner.startup_taints if t not in taints), NOT_READY)
    return node_manifest(
        name=instance.private_dns_name.lower() or instance.id,
        provider_id=instance.provider_id or f"aws:///{instance.zone}/{instance.id}",
        labels=node_labels,
        taints=taints,
        capacity=with_efa(itype.capacity, efa),
        allocatable=with_efa(itype.allocatable, efa),
        arch=itype.arch,
        os=itype.os,
        # The NodePool's template annotations, karpy's own stamps winning a clash.
        annotations={
            **provisioner.annotations,
            **hash_annotations(provisioner),
            **launched_image(instance),
            **startup_annotation(provisioner),
        },
    )


def with_efa(resources: Resources, efa: int) -> Resources:
    return Resources({**resources.amounts, EFA: min(resources.get(EFA), efa)})


def without_nodes(nodes: Sequence[Node], instances: Sequence[Instance]) -> list[Instance]:
    """Instances a karpy launch tagged (launch id) that no Node points at yet."""
    with_nodes = {instance_id(n.provider_id) for n in nodes}
    return [i for i in instances if i.tags.get(wk.LAUNCH_ID_TAG) and i.id not in with_nodes]
