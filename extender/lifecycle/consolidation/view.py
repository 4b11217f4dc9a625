"""The cluster as a consolidation decision sees it: plain, frozen data, no API objects, no clock.

Built from the API by `snapshot.py` (controller and `karpy plan --consolidate`) and directly by the
benchmark's simulated cluster and the unit tests.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property

from extender.api.affinity import LabelSelector
from extender.api.pod import Pod
from extender.api.provisioner import Provisioner
from extender.scheduling.instancetypes import InstanceType, OfferingKey
from extender.scheduling.plan import ExistingNode

#: Karpenter's commandValidationDelay: a decision is recomputed after this long before acting.
VALIDATION_DELAY_SECONDS = 15.0
#: Karpenter's MinInstanceTypesForSpotToSpotConsolidation.
MIN_SPOT_TO_SPOT_OPTIONS = 15
#: Nodes younger than this are left alone (they were launched for a reason moments ago).
MIN_NODE_AGE_SECONDS = 60.0


@dataclass(frozen=True)
class NodeState:
    """One node: the solver's view plus what consolidation weighs (price, age, annotations)."""

    node: ExistingNode
    #: $/h of the node's offering (its instance type, zone and capacity type).
    price: float
    capacity_type: str
    age_seconds: float
    #: A karpy node (karpy may delete it); others only bring topology and capacity.
    karpy: bool = True
    ready: bool = True
    #: Cordoned, deleting, marked for removal or holding a disruption slot: already on its way out.
    disrupting: bool = False
    do_not_consolidate: bool = False
    #: `karpenter.sh/do-not-disrupt: "true"` on the node.
    do_not_disrupt: bool = False
    #: Seconds since the last pod event on the node (bound, terminal, terminating, deleted), or
    #: since karpy first saw it; None when unknown. v1's `consolidateAfter` waits on it.
    idle_seconds: float | None = None

    @property
    def name(self) -> str:
        return self.node.name

    @cached_property
    def movable(self) -> tuple[Pod, ...]:
        """The pods that must find room elsewhere if the node goes (node-bound ones neither move
        nor block). Cached: one decision reads it many times per node (candidate order, blockers,
        every simulation); a frozen NodeState's pods never change."""
        return tuple(p for p in self.node.pods if not p.node_bound)

    @property
    def provisioner(self) -> str:
        return self.node.provisioner


@dataclass(frozen=True)
class PdbAllowance:
    """A PodDisruptionBudget as the API server computed it: how many evictions it allows now.
    (policy/v1: an empty selector covers every pod of the namespace; a null one is never built.)"""

    namespace: str
    selector: LabelSelector
    disruptions_allowed: int
    name: str = ""

    def covers(self, pod: Pod) -> bool:
        return (
            pod.namespace == self.namespace and not self.selector.empty and self.selector.matches(pod.labels)
        )


@dataclass(frozen=True)
class Settings:
    min_node_age_seconds: float = MIN_NODE_AGE_SECONDS
    min_spot_to_spot_options: int = MIN_SPOT_TO_SPOT_OPTIONS
    #: Karpenter caps multi-node consolidation at 100 candidates.
    max_multi_node_candidates: int = 100
    #: When the least-used candidates merge into nothing cheaper, multi-node tries the same number
    #: of candidates this many more times, each starting one node further down the order.
    merge_windows: int = 5
    #: A not-Ready node younger than this is capacity still coming up (the lifecycle's registration
    #: TTL); an older one is broken, which is the registration check's business, not a launch.
    launch_grace_seconds: float = 900.0
    #: Re-plans (decide._replans) take sets of up to `replan_max_nodes` of the this-many least-used
    #: candidates, at most `replan_max_simulations` solves per pass (each with the local search).
    replan_candidates: int = 6
    replan_max_nodes: int = 2
    replan_max_simulations: int = 24


@dataclass(frozen=True)
class ClusterView:
    provisioners: tuple[Provisioner, ...]
    instance_types: tuple[InstanceType, ...]
    nodes: tuple[NodeState, ...]
    pdbs: tuple[PdbAllowance, ...] = ()
    daemonsets: tuple[Pod, ...] = ()
    #: Pods not bound to any node (waiting for kube-scheduler or for karpy).
    pending: tuple[Pod, ...] = ()
    #: A provisioning batch is being planned, launched or bound.
    batch_in_flight: bool = False
    #: Namespace -> labels for namespaceSelector terms; None when unknown.
    namespaces: Mapping[str, Mapping[str, str]] | None = None
    unavailable: frozenset[OfferingKey] = field(default_factory=frozenset)
    #: When the view was read: budgets with a schedule are evaluated at it (None: every window open).
    now: datetime | None = None

    def provisioner(self, name: str) -> Provisioner | None:
        return self._provisioners_by_name.get(name)

    @cached_property
    def _provisioners_by_name(self) -> dict[str, Provisioner]:
        """Cached: a pass looks up each node's Provisioner several times (blockers, budgets, worth).
        The first of a name wins, as a scan in order would find it."""
        found: dict[str, Provisioner] = {}
        for prov in self.provisioners:
            found.setdefault(prov.name, prov)
        return found

    @cached_property
    def bins_only(self) -> bool:
        """No running pod has a rule that reaches beyond its own node's room (a spread, inter-pod
        affinity or anti-affinity): then existing nodes matter to a moving pod without such rules
        only as room (decide.simulate_removal). Cached: a decision simulates many moves on one view."""
        return not any(p.counts_pods for n in self.nodes for p in n.node.pods)

    @cached_property
    def rooms(self) -> tuple[tuple[ExistingNode, float, float], ...]:
        """(node, free cpu, free memory) of every node in order, -inf for a cordoned one: what
        decide.simulate_removal filters bins by. Cached: a decision simulates many moves on one
        view, and reading every node's resources again for each was a fifth of a simulation at
        1,000 nodes (benchmarks.consolidation)."""
        closed = -math.inf
        return tuple(
            (
                n.node,
                n.node.allocatable.cpu - n.node.requested.cpu,
                n.node.allocatable.memory - n.node.requested.memory,
            )
            if n.node.schedulable
            else (n.node, closed, closed)
            for n in self.nodes
        )
