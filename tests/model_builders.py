"""Test builders for the solver's own model objects (tests/builders.py builds API JSON and what karpy
parses from it): a node of the cluster as `solve()` takes it (`ExistingNode`), a new node of a plan
(`PlannedNode`) and a node as consolidation weighs it (`NodeState`).

Plain data, no API calls.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from extender.api import labels as wk
from extender.api.pod import Pod
from extender.api.provisioner import Taint
from extender.api.resources import Resources, total
from extender.lifecycle.consolidation.view import NodeState
from extender.scheduling.instancetypes import InstanceType
from extender.scheduling.plan import ExistingNode, PlannedNode

#: An m5.xlarge's room as the tests here give it: 4 CPU, 16Gi, 110 pods.
ROOM = Resources.parse({"cpu": "4", "memory": "16Gi", "pods": 110})


def existing_node(
    name: str = "n1",
    *,
    zone: str | None = "us-west-2a",
    hostname: bool = True,
    pods: Sequence[Pod] = (),
    labels: Mapping[str, str] | None = None,
    provisioner: str = "default",
    instance_type: str = "m5.xlarge",
    taints: Sequence[Taint] = (),
    allocatable: Resources = ROOM,
    requested: Resources | None = None,
    pod_count: int | None = None,
    schedulable: bool = True,
    **fields: Any,
) -> ExistingNode:
    """A node of the cluster labelled with its hostname (unless `hostname` is False) and `zone`
    (None = no zone label), then `labels`; `pods` bound to it. requested: the pods' requests summed
    unless given; pod_count: the pods' count unless given. `**fields` are other ExistingNode fields
    (volume_limits...)."""
    node_labels = {
        **({wk.HOSTNAME: name} if hostname else {}),
        **({wk.ZONE: zone} if zone else {}),
        **(labels or {}),
    }
    return ExistingNode(
        name=name,
        provisioner=provisioner,
        instance_type=instance_type,
        labels=node_labels,
        taints=tuple(taints),
        allocatable=allocatable,
        requested=total(p.requests for p in pods) if requested is None else requested,
        pod_count=len(pods) if pod_count is None else pod_count,
        pods=tuple(pods),
        schedulable=schedulable,
        **fields,
    )


def planned_node(
    pods: Iterable[Any],
    *,
    options: Sequence[InstanceType],
    zones: Sequence[str] = ("us-west-2a",),
    capacity_types: Sequence[str] = ("on-demand",),
    provisioner: str = "default",
    labels: Mapping[str, str] | None = None,
    price: float = 0.1,
) -> PlannedNode:
    """A new node of a plan holding `pods` (Pods, or stand-ins with a `key`), launched in the first of
    `zones` and `capacity_types` it may take; labelled with its provisioner's name, then `labels`; no
    taints, requests left empty."""
    return PlannedNode(
        provisioner=provisioner,
        options=tuple(options),
        zones=tuple(zones),
        capacity_types=tuple(capacity_types),
        zone=zones[0],
        capacity_type=capacity_types[0],
        price=price,
        pods=tuple(pods),
        labels={wk.PROVISIONER_NAME: provisioner, **(labels or {})},
        taints=(),
        requests=Resources(),
    )


def node_state(
    name: str,
    instance_type: str,
    pods: Sequence[Pod],
    *,
    types: Sequence[InstanceType],
    capacity_type: str = "on-demand",
    provisioner: str = "default",
    age: float = 3600.0,
    **state: Any,
) -> NodeState:
    """A karpy node of `provisioner` in us-west-2a as consolidation sees it: the `instance_type` of
    `types` (its labels and allocatable), priced at that type's cheapest `capacity_type` offering in
    the zone, `age` seconds old, `pods` bound; `**state` are other NodeState fields."""
    it = next(t for t in types if t.name == instance_type)
    zone = "us-west-2a"
    price = min(o.price for o in it.offerings if o.capacity_type == capacity_type and o.zone == zone)
    labels = {
        **it.labels(),
        wk.HOSTNAME: name,
        wk.ZONE: zone,
        wk.CAPACITY_TYPE: capacity_type,
        wk.PROVISIONER_NAME: provisioner,
    }
    node = existing_node(
        name,
        zone=None,
        hostname=False,
        labels=labels,
        provisioner=provisioner,
        instance_type=instance_type,
        allocatable=it.allocatable,
        pods=pods,
    )
    return NodeState(node=node, price=price, capacity_type=capacity_type, age_seconds=age, **state)
