"""The hash of what a Provisioner puts on its nodes, stamped on each node at launch (drift).

As Karpenter's static drift (v0.30 `Provisioner.Hash`, later `nodepool-hash`): the fields that
shape a node — labels, annotations, taints, startup taints, kubelet configuration, the provider's
node settings — hashed with
zero values left out, so a field added to the model later (at its default) changes no hash and
drifts no node. Fields that do not shape a node (requirements, which are checked against the
node's labels instead; limits, weight, TTLs, consolidation, budgets) are not hashed. Provider
selectors (subnets, security groups, a named launch template, AMI selection) pick cloud resources
rather than configure the node: Karpenter leaves them out of the hash too.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from extender.api import labels as wk
from extender.api.provisioner import Provisioner

#: Bump when what is hashed changes (a field added with a non-zero default, a field moved in or
#: out): nodes stamped with another version are re-stamped by the drift check, not drifted.
HASH_VERSION = "v1"
#: AWSProvider fields left out of the hash (snake_case dataclass field names); Karpenter's
#: EC2NodeClass marks the selector terms, capacityReservationSelectorTerms among them, hash:"ignore".
SELECTOR_FIELDS = frozenset(
    {
        "subnet_selector",
        "security_group_selector",
        "capacity_reservation_selector",
        "launch_template",
        "ami_selector",
        "ami_selector_terms",
    }
)


def _pruned(value: Any) -> Any:
    """`value` without zero values (None, "", 0, False, empty containers), as hashstructure's
    IgnoreZeroValue/ZeroNil; lists of taints and such are compared as sets (sorted)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        items = {str(k): _pruned(v) for k, v in value.items()}
        return {k: v for k, v in items.items() if v not in (None, "", 0, False, {}, [])}
    if isinstance(value, list | tuple | set | frozenset):
        return sorted((_pruned(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    return value


def node_shape(provisioner: Provisioner) -> dict[str, Any]:
    """The hashed fields, zero values left out."""
    provider = {
        f.name: getattr(provisioner.provider, f.name)
        for f in dataclasses.fields(provisioner.provider)
        if f.name not in SELECTOR_FIELDS
    }
    shaped: dict[str, Any] = _pruned(
        {
            "labels": provisioner.labels,
            "taints": provisioner.taints,
            # NodePool template fields Karpenter's NodePool.Hash covers; empty ones drop out, so
            # NodePools without them keep their hash.
            "startup_taints": provisioner.startup_taints,
            "annotations": provisioner.annotations,
            "kubelet": provisioner.kubelet,
            "provider": provider,
        }
    )
    return shaped


def provisioner_hash(provisioner: Provisioner) -> str:
    text = json.dumps(node_shape(provisioner), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def hash_annotations(provisioner: Provisioner) -> dict[str, str]:
    """What a node launched now from `provisioner` carries (launcher), and drift compares."""
    return {
        wk.PROVISIONER_HASH_ANNOTATION: provisioner_hash(provisioner),
        wk.PROVISIONER_HASH_VERSION_ANNOTATION: HASH_VERSION,
    }
