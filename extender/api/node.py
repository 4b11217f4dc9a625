"""A Node as karpy reads it: parsed once from API JSON where it enters (the cluster adapter's list
and read, the node index, the lifecycle's watch and reads), then passed around as this model.

The solver's `ExistingNode` (the node with its bound pods and their requests) and ClusterState's
`NodeInfo` (what the extender's guard needs) are views built from it in one place
(extender/cluster/inventory.py), not parsed from the JSON again.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any

from extender.api import labels as wk
from extender.api import repair_policies
from extender.api.meta import parse_time_or_none
from extender.api.nodeclass import API_GROUP as NODECLASS_GROUP
from extender.api.provisioner import Taint
from extender.api.quantity import QuantityError
from extender.api.resources import Resources

#: Annotation domains karpy reads on a node; the others (often KBs of CSI and CNI state per node)
#: are not kept: the node index holds every node of the cluster.
# karpenter.k8s.aws/: the AMI a node was launched from (nodeclass.AMI_ID_ANNOTATION), for drift.
KEPT_ANNOTATIONS = (f"{wk.GROUP}/", "karpy.sh/", f"{NODECLASS_GROUP}/")
_NO_ANNOTATIONS: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Condition:
    status: str = ""
    reason: str = ""


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
    uid: str = ""
    #: Only karpy's own (KEPT_ANNOTATIONS).
    annotations: Mapping[str, str] = field(default_factory=lambda: _NO_ANNOTATIONS)
    created: datetime | None = None
    #: metadata.deletionTimestamp.
    deleted_at: datetime | None = None
    finalizers: tuple[str, ...] = ()
    #: None when the kubelet never posted one.
    ready_condition: Condition | None = None
    resource_version: str = ""
    #: Conditions in a status a repair policy acts on (api/repair_policies.py); empty for a healthy node.
    unhealthy: tuple[repair_policies.Unhealthy, ...] = ()

    @property
    def provisioner(self) -> str | None:
        """The Provisioner or NodePool that launched it; None for a node karpy does not manage."""
        return wk.owner_of(self.labels)

    @property
    def is_karpy(self) -> bool:
        """Karpenter 0.5 manages exactly the nodes labelled with a provisioner name."""
        return self.provisioner is not None

    def has_taint(self, key: str) -> bool:
        return any(t.key == key for t in self.taints)

    @property
    def startup_taints(self) -> tuple[Taint, ...]:
        """The taints of its NodePool's startupTaints it still carries (key and effect match, as
        Karpenter's IsStartupTaint)."""
        listed = parse_taints(self.annotations.get(wk.STARTUP_TAINTS_ANNOTATION, ""))
        return tuple(t for t in self.taints if any((t.key, t.effect) == (s.key, s.effect) for s in listed))

    @classmethod
    def from_live(cls, obj: Mapping[str, Any]) -> Node:
        """`from_manifest` for the lifecycle, which never plans on the node: a capacity karpy cannot
        read is left empty instead of failing the node (the node index, which plans, skips it)."""
        return cls.from_manifest(obj, lenient=True)

    @classmethod
    def from_manifest(cls, obj: Mapping[str, Any], *, lenient: bool = False) -> Node:
        """Raises QuantityError for a capacity karpy cannot read, unless `lenient`."""
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        ready = next((c for c in status.get("conditions") or () if c.get("type") == "Ready"), None)
        raw_annotations = meta.get("annotations") or {}
        annotations = {k: str(v) for k, v in raw_annotations.items() if k.startswith(KEPT_ANNOTATIONS)}
        return cls(
            name=str(meta.get("name") or ""),
            labels=dict(meta.get("labels") or {}),
            taints=tuple(
                Taint(key=t.get("key", ""), value=t.get("value", ""), effect=t.get("effect", ""))
                for t in spec.get("taints") or ()
            ),
            capacity=_resources(status.get("capacity"), lenient),
            allocatable=_resources(status.get("allocatable"), lenient),
            provider_id=str(spec.get("providerID") or ""),
            unschedulable=bool(spec.get("unschedulable")),
            deleting=bool(meta.get("deletionTimestamp")),
            ready=ready is not None and ready.get("status") == "True",
            uid=str(meta.get("uid") or ""),
            annotations=annotations or _NO_ANNOTATIONS,
            created=parse_time_or_none(meta.get("creationTimestamp")),
            deleted_at=parse_time_or_none(meta.get("deletionTimestamp")),
            # Interned and shared: every node carries the same few finalizers and conditions.
            finalizers=tuple(sys.intern(str(f)) for f in meta.get("finalizers") or ()),
            ready_condition=None
            if ready is None
            else _condition(str(ready.get("status") or ""), str(ready.get("reason") or "")),
            resource_version=str(meta.get("resourceVersion") or ""),
            unhealthy=_unhealthy(status.get("conditions")),
        )


def format_taints(taints: Sequence[Taint]) -> str:
    """`key=value:Effect` (`key:Effect` without a value), comma-separated, as `kubectl taint` writes them."""
    return ",".join(f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}" for t in taints)


@functools.lru_cache(maxsize=256)
def parse_taints(text: str) -> tuple[Taint, ...]:
    """`format_taints` read back; a malformed entry is skipped (the annotation is karpy's own)."""
    result = []
    for item in filter(None, text.split(",")):
        head, _, effect = item.rpartition(":")
        key, _, value = head.partition("=")
        if key and effect:
            result.append(Taint(key=key, value=value, effect=effect))
    return tuple(result)


@functools.lru_cache(maxsize=64)
def _condition(status: str, reason: str) -> Condition:
    return Condition(status, reason)


def _unhealthy(conditions: Any) -> tuple[repair_policies.Unhealthy, ...]:
    found = []
    for c in conditions or ():
        if not isinstance(c, Mapping):
            continue
        kind, status = str(c.get("type") or ""), str(c.get("status") or "")
        if repair_policies.watched(kind, status):
            found.append(
                repair_policies.Unhealthy(kind, status, parse_time_or_none(c.get("lastTransitionTime")))
            )
    return tuple(found)


def _resources(raw: Any, lenient: bool) -> Resources:
    try:
        return Resources.parse(raw)
    except QuantityError:
        if lenient:
            return Resources()
        raise
