"""The solver's output: a frozen Plan of new nodes, pods placed on existing nodes, and the rest.

Consumed as-is by the provisioning worker (launch + bind), `karpy plan` and the benchmarks;
`Plan.describe()` renders the Karpenter 0.5 log lines they all print.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from extender.api.pod import Pod
from extender.api.provisioner import Taint
from extender.api.resources import Resources
from extender.scheduling import attach
from extender.scheduling.instancetypes import InstanceType

MAX_LOGGED_OPTIONS = 10


@dataclass(frozen=True)
class Unschedulable:
    pod: Pod
    reason: str
    #: The pod has a rule karpy does not model: neither planned nor bound, only reported.
    unmodelled: bool = False
    #: The Provisioner whose limits left the pod out (the last one tried), if limits did.
    over_limits: str | None = None


@dataclass(frozen=True)
class ExistingNode:
    """A node of the cluster: its pods count for topology; karpy places pods on it when `schedulable`.

    Schedulable nodes are karpy's own live or in-flight nodes that can still take pods; every other
    node (not karpy's, cordoned, being removed) only brings its topology domains and pods.
    """

    name: str
    provisioner: str
    instance_type: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    allocatable: Resources
    requested: Resources
    pod_count: int
    #: Pods bound to the node (topology spread, inter-pod affinity and host ports count them).
    pods: tuple[Pod, ...] = ()
    schedulable: bool = True
    #: (CSI driver, attach limit) from the node's CSINode; a driver not listed is unlimited.
    volume_limits: tuple[tuple[str, int], ...] = ()
    #: (CSI driver, volumes in use) by the node's pods.
    volumes_in_use: tuple[tuple[str, int], ...] = ()

    def volume_room(self, driver: str) -> int:
        """Volumes of the driver the node can still attach."""
        limit = next((n for d, n in self.volume_limits if d == driver), None)
        if limit is None:
            return attach.UNLIMITED
        return limit - sum(n for d, n in self.volumes_in_use if d == driver)


@dataclass(frozen=True)
class PlannedNode:
    provisioner: str
    #: Every type that holds `pods` under the node's requirements, cheapest first (capped).
    options: tuple[InstanceType, ...]
    zones: tuple[str, ...]
    capacity_types: tuple[str, ...]
    #: Zone and capacity type of the cheapest available offering of options[0]; `price` is its $/h.
    zone: str
    capacity_type: str
    price: float
    pods: tuple[Pod, ...]
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    requests: Resources
    #: The capacity reservation the node launches into (capacity type "reserved"; reservations.py).
    reservation_id: str = ""

    @property
    def instance_type(self) -> InstanceType:
        return self.options[0]

    def node_labels(self) -> dict[str, str]:
        """The labels the node will carry if launched as its cheapest option."""
        return {
            **self.labels,
            **self.instance_type.labels(),
            "topology.kubernetes.io/zone": self.zone,
            "karpenter.sh/capacity-type": self.capacity_type,
        }


@dataclass(frozen=True)
class Plan:
    nodes: tuple[PlannedNode, ...] = ()
    existing: Mapping[str, tuple[Pod, ...]] = field(default_factory=dict)
    unschedulable: tuple[Unschedulable, ...] = ()
    total_price: float = 0.0
    #: LP-relaxation lower bound on the $/h of new capacity for the pods placed on new nodes
    #: (0 unless solve() was asked `with_bound`).
    lower_bound: float = 0.0
    notes: tuple[str, ...] = ()
    #: pod key -> bind phase for placed pods that bind after others (absent: phase 0). Every pod of
    #: a phase binds before any pod of a later one; within a phase the order is free. A pod that
    #: would put a spreading pod over its maxSkew binds after it, as kube-scheduler checks only the
    #: incoming pod's own spread (domains.py).
    bind_phases: Mapping[str, int] = field(default_factory=dict)
    #: Computes that bound on demand (solver.py keeps what it needs), so a caller can have it after
    #: acting on the plan: the provisioning pipeline asks it once the batch's pods are bound.
    bounding: Callable[[], float] | None = field(default=None, compare=False, repr=False)

    @property
    def gap(self) -> float | None:
        """Plan cost over lower bound, minus 1 (0.03 = 3 % above the bound); None without a bound."""
        if self.lower_bound <= 0:
            return None
        return self.total_price / self.lower_bound - 1

    def placed(self) -> dict[str, str]:
        """pod key -> node ("planned-<i>" for new nodes, the name for existing ones)."""
        result = {p.key: f"planned-{i}" for i, node in enumerate(self.nodes) for p in node.pods}
        result.update({p.key: name for name, pods in self.existing.items() for p in pods})
        return result

    def phase(self, pod_key: str) -> int:
        """The bind phase of a placed pod (0 = first)."""
        return self.bind_phases.get(pod_key, 0)

    def left_to_scheduler(self) -> dict[str, tuple[str, ...]]:
        """Placed pods kube-scheduler binds (pod key -> the rules karpy left to it): karpy reserves
        their room on the node the plan gives them and does not bind them."""
        placed = [
            *(p for node in self.nodes for p in node.pods),
            *(p for ps in self.existing.values() for p in ps),
        ]
        return {p.key: p.deferred for p in placed if p.deferred}

    def by_provisioner(self) -> dict[str, list[PlannedNode]]:
        result: dict[str, list[PlannedNode]] = {}
        for node in self.nodes:
            result.setdefault(node.provisioner, []).append(node)
        return result

    def describe(self) -> list[str]:
        """Karpenter-style log lines: one packing line per group of nodes with the same options."""
        lines = []
        groups: dict[tuple[str, tuple[str, ...]], list[PlannedNode]] = {}
        for node in self.nodes:
            groups.setdefault((node.provisioner, tuple(t.name for t in node.options)), []).append(node)
        for (_, names), nodes in groups.items():
            shown = " ".join(names[:MAX_LOGGED_OPTIONS])
            if len(names) > MAX_LOGGED_OPTIONS:
                shown += f" and {len(names) - MAX_LOGGED_OPTIONS} other(s)"
            pods = sum(len(n.pods) for n in nodes)
            count = f"of {len(nodes)} node(s) " if len(nodes) > 1 else ""
            lines.append(f"Computed packing {count}for {pods} pod(s) with instance type option(s) [{shown}]")
        for name, placed in self.existing.items():
            lines.append(f"Packed {len(placed)} pod(s) onto existing node {name}")
        for key, rules in self.left_to_scheduler().items():
            lines.append(
                f"Leaving pod {key} to kube-scheduler to bind, karpy does not evaluate {'; '.join(rules)}"
            )
        if self.bind_phases:
            last = max(self.bind_phases.values())
            lines.append(
                f"Binding {len(self.bind_phases)} pod(s) in {last} later phase(s), after the pods"
                " whose topology spread they count"
            )
        for item in self.unschedulable:
            lines.append(f"Unable to schedule pod {item.pod.key}, {item.reason}")
        lines.extend(self.notes)
        if self.nodes:
            bound = f", lower bound ${self.lower_bound:.4f}/h" if self.lower_bound > 0 else ""
            gap = f" (+{self.gap * 100:.1f}%)" if self.gap is not None else ""
            lines.append(f"Planned {len(self.nodes)} node(s) at ${self.total_price:.4f}/h{bound}{gap}")
        return lines
