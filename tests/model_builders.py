"""Test builders for the solver's own model objects (tests/builders.py builds API JSON and what karpy
parses from it): a node of the cluster as `solve()` takes it (`ExistingNode`).

Plain data, no API calls.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from extender.api import labels as wk
from extender.api.pod import Pod
from extender.api.provisioner import Taint
from extender.api.resources import Resources, total
from extender.scheduling.plan import ExistingNode

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
