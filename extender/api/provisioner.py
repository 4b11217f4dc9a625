"""The karpenter.sh/v1alpha5 Provisioner: plain dataclasses plus the one marshmallow schema that parses them.

Every process (webhook, controller, `karpy plan`) loads Provisioners through `load_provisioner`;
validation rules live in the schema only (see webhook/ for admission on top of it).
"""

from __future__ import annotations

import copy
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


#: Karpenter's default disruption budget (NodePool `budgets: [{nodes: "10%"}]`).
DEFAULT_DISRUPTION_BUDGET = "10%"


@dataclass(frozen=True)
class Provisioner:
    name: str
    requirements: tuple[Requirement, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    ttl_seconds_after_empty: int | None = None
    ttl_seconds_until_expired: int | None = None
    limits: Resources = field(default_factory=Resources)
    #: Resource names `limits` sets, zeros included.
    limited: frozenset[str] = frozenset()
    weight: int = 0
    #: `spec.consolidation.enabled`: delete or replace under-used nodes (exclusive with the empty TTL).
    consolidation: bool = False
    #: `spec.disruption.nodes`: how many of this Provisioner's nodes may be voluntarily disrupted
    #: (emptiness, expiry, consolidation together) at once: "N" nodes or "N%" of its nodes.
    disruption_budget: str = DEFAULT_DISRUPTION_BUDGET
    kubelet: KubeletConfiguration = field(default_factory=KubeletConfiguration)
    provider: AWSProvider = field(default_factory=AWSProvider)
    uid: str = ""
    resource_version: str = ""

    def limit_names(self, names: tuple[str, ...]) -> list[str]:
        """Which of `names` this Provisioner limits (a limit of 0 counts)."""
        return [n for n in names if n in self.limited or self.limits.get(n) > 0]

    def requirement_keys(self) -> frozenset[str]:
        return frozenset(r.key for r in self.requirements)


def default_provisioner(name: str = "default") -> Provisioner:
    """A Provisioner with no constraints, as `karpy plan` assumes when given none."""
    return Provisioner(name=name)


def load_provisioner(obj: Mapping[str, Any]) -> Provisioner:
    """Parse a Provisioner manifest (API JSON).

    Raises marshmallow.ValidationError whose `messages` is a list of `path: message` lines.
    """
    from extender.api.provisioner_schema import parse_provisioner

    return parse_provisioner(dict(obj))


def default_manifest(
    obj: Mapping[str, Any], *, cluster_name: str, cluster_endpoint: str = "", instance_profile: str = ""
) -> dict[str, Any]:
    """The Provisioner manifest with Karpenter 0.5's defaults applied; `obj` is not modified.

    Rewrites the `node.k8s.aws/capacity-type` alias, defaults arch (amd64) and capacity type (on-demand)
    when neither requirements nor labels mention them, fills `provider.cluster` and defaults both
    selectors to `kubernetes.io/cluster/<cluster>: "*"`; `instance_profile` (Karpenter 0.5.6's
    AWS_DEFAULT_INSTANCE_PROFILE) fills a missing instanceProfile when no launchTemplate is set.
    Parts of the wrong shape are left alone for validation to report.
    """
    result = copy.deepcopy(dict(obj))
    spec = result.setdefault("spec", {})
    if not isinstance(spec, dict):
        return result
    raw_labels = spec.get("labels")
    if (
        isinstance(raw_labels, dict)
        and labels.CAPACITY_TYPE_ALIAS in raw_labels
        and labels.CAPACITY_TYPE not in raw_labels
    ):
        spec["labels"] = {canonical_key(k): v for k, v in raw_labels.items()}
    requirements = spec.setdefault("requirements", [])
    if isinstance(requirements, list):
        for req in requirements:
            if isinstance(req, dict) and isinstance(req.get("key"), str):
                req["key"] = canonical_key(req["key"])
        mentioned = {r["key"] for r in requirements if isinstance(r, dict) and isinstance(r.get("key"), str)}
        if isinstance(spec.get("labels"), dict):
            mentioned |= set(spec["labels"])
        for key, value in ((labels.ARCH, "amd64"), (labels.CAPACITY_TYPE, labels.CAPACITY_TYPE_ON_DEMAND)):
            if key not in mentioned:
                requirements.append({"key": key, "operator": "In", "values": [value]})
    provider = spec.setdefault("provider", {})
    if isinstance(provider, dict):
        cluster = provider.get("cluster")
        if cluster is None:
            cluster = provider["cluster"] = {"name": cluster_name}
            if cluster_endpoint:
                cluster["endpoint"] = cluster_endpoint
        name = cluster.get("name") if isinstance(cluster, dict) else None
        selector = {f"kubernetes.io/cluster/{name or cluster_name}": "*"}
        for field_name in ("subnetSelector", "securityGroupSelector"):
            if provider.get(field_name) is None:
                provider[field_name] = dict(selector)
        if instance_profile and not provider.get("instanceProfile") and not provider.get("launchTemplate"):
            provider["instanceProfile"] = instance_profile
    return result


def canonical_key(key: str) -> str:
    return labels.normalize_key(key)
