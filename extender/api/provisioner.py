"""The karpenter.sh/v1alpha5 Provisioner as plain frozen dataclasses.

Types only: Karpenter 0.5's defaults are applied to a manifest by `provisioner_defaults`, and a
manifest is parsed and validated into these types by `provisioner_schema.load_provisioner`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from extender.api import labels as wk

# Re-exported: the kubelet block and the node configuration are part of a Provisioner.
from extender.api.disruption import Budget, SavingsThreshold
from extender.api.kubelet import KubeletConfiguration as KubeletConfiguration
from extender.api.nodeclass import ClusterRef as ClusterRef
from extender.api.nodeclass import NodeClass
from extender.api.resources import Resources

#: The inline `spec.provider` and a referenced AWSNodeTemplate load into the same NodeClass.
AWSProvider = NodeClass

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()
    #: NodePool `minValues` (v1beta1+): a launch's instance types span at least this many values
    #: of the key (scheduling/minvalues.py); v1alpha5 requirements and pods' have none.
    min_values: int | None = None


@dataclass(frozen=True)
class Taint:
    key: str
    effect: str
    value: str = ""


#: The two API kinds loaded into a Provisioner (`kind`).
PROVISIONER_KIND, NODEPOOL_KIND = "Provisioner", "NodePool"

#: Karpenter's default disruption budget (NodePool `budgets: [{nodes: "10%"}]`).
DEFAULT_DISRUPTION_BUDGET = "10%"


@dataclass(frozen=True)
class Overlay:
    """A NodeOverlay (karpenter.sh/v1alpha1) as the solver applies it to a pool's instance types
    (extender/api/nodeoverlay.py loads it; extender/scheduling/overlays.py applies it)."""

    name: str
    requirements: tuple[Requirement, ...] = ()
    #: Karpenter's one price string: "0.5" replaces the offering price, "+0.1" / "-10%" adjusts it.
    price: str | None = None
    #: Extended resources added to (or replacing the same names in) the type's capacity.
    capacity: Resources = field(default_factory=Resources)
    #: 0 when unset (the CRD admits 1..10000); higher applies first.
    weight: int = 0


@dataclass(frozen=True)
class Provisioner:
    name: str
    requirements: tuple[Requirement, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    #: NodePool `spec.template.spec.startupTaints`: put on each node at launch and expected to be
    #: removed by something on the node (a CNI or CSI agent); pods need not tolerate them to have a
    #: node planned, and the node is not Initialized while one remains.
    startup_taints: tuple[Taint, ...] = ()
    #: NodePool `spec.template.metadata.annotations`: put on each node (and its NodeClaim) at launch.
    annotations: Mapping[str, str] = field(default_factory=dict)
    ttl_seconds_after_empty: int | None = None
    ttl_seconds_until_expired: int | None = None
    limits: Resources = field(default_factory=Resources)
    #: Resource names `limits` sets, zeros included.
    limited: frozenset[str] = frozenset()
    weight: int = 0
    #: `spec.consolidation.enabled`: delete or replace under-used nodes (exclusive with the empty TTL).
    consolidation: bool = False
    #: `karpy.sh/consolidation-min-savings` (metadata annotation, both APIs): the least a move
    #: that evicts pods must save.
    consolidation_min_savings: SavingsThreshold = field(default_factory=SavingsThreshold)
    #: NodePool `consolidationPolicy: Balanced`: its k (a move's share of the pool's cost saved
    #: must be at least 1/k of its share of the pool's disruption); None for any other policy.
    consolidation_threshold: int | None = None
    #: v1 `spec.disruption.budgets`: how many of its nodes may be voluntarily disrupted at once, per
    #: reason. A v1alpha5 `spec.disruption.nodes` loads as the one budget for every reason (and,
    #: unlike v1's, for expiry too: `budgets_hold_expiry`).
    budgets: tuple[Budget, ...] = (Budget(nodes=DEFAULT_DISRUPTION_BUDGET),)
    #: v1 `spec.disruption.consolidateAfter` in seconds (None = "Never"): how long a node must have
    #: been empty or under-used before consolidation may take it. The CRD's default, 0, is also a
    #: v1alpha5 Provisioner's (it has no such field and waits for nothing).
    consolidate_after: int | None = 0
    #: v1 `spec.template.spec.terminationGracePeriod` in seconds: a drain blocked longer ends.
    termination_grace_period: int | None = None
    #: Which API the object came from: "Provisioner" (karpenter.sh/v1alpha5) or "NodePool"
    #: (karpenter.sh/v1). Decides the node's owner label (`provisioner-name` or `nodepool`).
    kind: str = PROVISIONER_KIND
    kubelet: KubeletConfiguration = field(default_factory=KubeletConfiguration)
    provider: NodeClass = field(default_factory=NodeClass)
    #: `spec.providerRef.name`: the AWSNodeTemplate `provider` was loaded from ("" = inline provider).
    provider_ref: str = ""
    #: The NodeOverlays that apply to this pool's instance types, highest precedence first, those
    #: in conflict left out (scheduling/overlays.py `resolve`); () for a pool no overlay names.
    overlays: tuple[Overlay, ...] = ()
    #: The capacity reservations its NodeClass selects now (ids, set beside the catalog's reserved
    #: offerings each batch: scheduling/reservations.py `attach`); only these reserved offerings are its.
    capacity_reservations: frozenset[str] = frozenset()
    uid: str = ""
    resource_version: str = ""
    #: NodePool `spec.replicas` (Karpenter's static NodePools): keep exactly this many nodes whatever
    #: the pods; None = a dynamic pool. A static pool is never consolidated or emptied, and the solver
    #: never launches for it (provisioning/static.py does).
    replicas: int | None = None

    @property
    def is_static(self) -> bool:
        return self.replicas is not None

    def spec_only(self) -> Provisioner:
        """The pool less its identity and version: equal across karpy's own status writes (which
        bump resourceVersion), different after an edit. "Report or back off again on a change" keys
        on it."""
        return replace(self, uid="", resource_version="")

    @property
    def is_v1(self) -> bool:
        """A karpenter.sh/v1 NodePool. The generations differ only through the properties below;
        nothing outside extender/api asks for `kind`."""
        return self.kind == NODEPOOL_KIND

    @property
    def noun(self) -> str:
        """How logs and Events name this kind of object, as Karpenter's do: "nodepool" in v1."""
        return "nodepool" if self.is_v1 else "provisioner"

    @property
    def owner_label(self) -> str:
        """The label naming this object on its nodes: `karpenter.sh/nodepool` for a NodePool."""
        return wk.NODEPOOL if self.is_v1 else wk.PROVISIONER_NAME

    @property
    def records_nodeclaims(self) -> bool:
        """Whether its nodes get NodeClaims: Karpenter v1 has no Provisioners, and a v1alpha5 node
        has no v1 object to belong to."""
        return self.is_v1

    @property
    def has_v1_status(self) -> bool:
        """Whether its status is v1's (conditions written by cluster/v1status.py) rather than the
        v1alpha5 `status.resources` the provisioning reporter patches."""
        return self.is_v1

    @property
    def budgets_hold_expiry(self) -> bool:
        """Whether `budgets` hold expiry too: v1's expiration is forceful (no budget holds it,
        Karpenter's designs/forceful-expiration.md); karpy always applied the v1alpha5 budget to it."""
        return not self.is_v1

    @property
    def drifted_reason(self) -> str:
        """The Drifted reason when its node-shaping hash changed: Karpenter's `NodePoolDrifted`."""
        return f"{self.kind}Drifted"

    def selected_by(self, node_selector: Mapping[str, str]) -> bool:
        """Whether a nodeSelector naming an owner (either label) names this one, by its own label:
        a pod selecting `karpenter.sh/nodepool: x` does not land on Provisioner x's nodes."""
        return all(node_selector.get(key, self.name) == self.name for key in wk.OWNER_LABELS) and (
            self.owner_label in node_selector
        )

    def limit_names(self, names: tuple[str, ...]) -> list[str]:
        """Which of `names` this Provisioner limits (a limit of 0 counts)."""
        return [n for n in names if n in self.limited or self.limits.get(n) > 0]

    def requirement_keys(self) -> frozenset[str]:
        return frozenset(r.key for r in self.requirements)


def default_provisioner(name: str = "default") -> Provisioner:
    """A Provisioner with no constraints, as `karpy plan` assumes when given none."""
    return Provisioner(name=name)
