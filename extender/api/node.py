"""A Node as karpy reads it: parsed once from API JSON where it enters (the cluster adapter's list
and read), then passed around as this model.

The solver's `ExistingNode` (the node with its bound pods and their requests) and ClusterState's
`NodeInfo` (what the extender's guard needs) are views built from it in one place
(extender/cluster/inventory.py), not parsed from the JSON again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from extender.api import labels as wk
from extender.api.provisioner import Taint
from extender.api.resources import Resources


@dataclass(frozen=True)
class Node:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    capacity: Resources = field(default_factory=Resources)
    allocatable: Resources = field(default_factory=Resources)
    provider_id: str = ""
    #: spec.unschedulable (cordoned).
    unschedulable: bool = False
    #: metadata.deletionTimestamp is set.
    deleting: bool = False
    #: The Ready condition is True.
    ready: bool = False

    @property
    def provisioner(self) -> str | None:
        """The Provisioner that launched it; None for a node karpy does not manage."""
        return self.labels.get(wk.PROVISIONER_NAME)

    @property
    def is_karpy(self) -> bool:
        """Karpenter 0.5 manages exactly the nodes labelled with a provisioner name."""
        return self.provisioner is not None

    @classmethod
    def from_manifest(cls, obj: Mapping[str, Any]) -> Node:
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        return cls(
            name=str(meta.get("name") or ""),
            labels=dict(meta.get("labels") or {}),
            taints=tuple(
                Taint(key=t.get("key", ""), value=t.get("value", ""), effect=t.get("effect", ""))
                for t in spec.get("taints") or ()
            ),
            capacity=Resources.parse(status.get("capacity")),
            allocatable=Resources.parse(status.get("allocatable")),
            provider_id=str(spec.get("providerID") or ""),
            unschedulable=bool(spec.get("unschedulable")),
            deleting=bool(meta.get("deletionTimestamp")),
            ready=any(
                c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or ()
            ),
        )
