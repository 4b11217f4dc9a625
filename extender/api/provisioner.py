"""The karpenter.sh/v1alpha5 Provisioner: plain dataclasses plus the one marshmallow schema that parses them.

Every process (webhook, controller, `karpy plan`) loads Provisioners through `load_provisioner`;
validation rules live in the schema only (see webhook/ for admission on top of it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from extender.api import labels
from extender.api.resources import Resources

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()


@dataclass(frozen=True)
class Taint:
    key: str
    effect: str
    value: str = ""


@dataclass(frozen=True)
class ClusterRef:
    name: str
    endpoint: str = ""


@dataclass(frozen=True)
class AWSProvider:
    instance_profile: str = ""
    launch_template: str = ""
    subnet_selector: Mapping[str, str] = field(default_factory=dict)
    security_group_selector: Mapping[str, str] = field(default_factory=dict)
    tags: Mapping[str, str] = field(default_factory=dict)
    ami_family: str = ""
    cluster: ClusterRef | None = None


@dataclass(frozen=True)
class KubeletConfiguration:
    cluster_dns: tuple[str, ...] = ()
    max_pods: int | None = None


@dataclass(frozen=True)
class Provisioner:
    name: str
    requirements: tuple[Requirement, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    ttl_seconds_after_empty: int | None = None
    ttl_seconds_until_expired: int | None = None
    limits: Resources = field(default_factory=Resources)
    weight: int = 0
    kubelet: KubeletConfiguration = field(default_factory=KubeletConfiguration)
    provider: AWSProvider = field(default_factory=AWSProvider)
    uid: str = ""
    resource_version: str = ""

    def requirement_keys(self) -> frozenset[str]:
        return frozenset(r.key for r in self.requirements)


def default_provisioner(name: str = "default") -> Provisioner:
    """A Provisioner with no constraints, as `karpy plan` assumes when given none."""
    return Provisioner(name=name)


def load_provisioner(obj: Mapping[str, Any]) -> Provisioner:
    """Parse a Provisioner manifest (API JSON); raises marshmallow.ValidationError with field paths."""
    from extender.api.provisioner_schema import ProvisionerSchema

    return ProvisionerSchema().load(dict(obj))


def canonical_key(key: str) -> str:
    return labels.normalize_key(key)
