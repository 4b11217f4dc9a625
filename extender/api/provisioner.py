"""The karpenter.sh/v1alpha5 Provisioner as plain frozen dataclasses.

Types only: Karpenter 0.5's defaults are applied to a manifest by `provisioner_defaults`, and a
manifest is parsed and validated into these types by `provisioner_schema.load_provisioner`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

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
