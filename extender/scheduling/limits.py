"""Provisioner limits, the one place they are read: the headroom each Provisioner has left after
its live and in-flight nodes (`usage`), whether a type fits it, what a node charges to it, and the
last check of the planned nodes. The packer charges nodes as it opens them; `apply` checks the
final plan, whose nodes may have shrunk or merged since.

Every resource a Provisioner's `spec.limits.resources` names is counted (cpu, memory, pods,
ephemeral-storage, accelerators, EFA: `resources.COUNTABLE`; the webhook refuses others); a node
counts its instance type's capacity, as Karpenter counts it, and 1 towards `nodes` (a NodePool's
`limits.nodes`: Karpenter's designs/nodepool-node-limits.md, a hard limit on launches).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from extender.api import labels as wk
from extender.api.provisioner import Provisioner
from extender.api.resources import NODES, Resources
from extender.scheduling import minvalues
from extender.scheduling.constraints import min_values
from extender.scheduling.instancetypes import InstanceType
from extender.scheduling.plan import PlannedNode, Unschedulable
from extender.scheduling.requirements import Requirements, ValueSet

EPS = 1e-9
#: Every limits reason contains this.
EXCEEDED = "limits exceeded"


def amount(instance_type: InstanceType, name: str) -> float:
    """What a node of the type counts towards the limit on `name`."""
    return 1.0 if name == NODES else instance_type.capacity.get(name)


def names(provisioner: Provisioner) -> tuple[str, ...]:
    """The resources the Provisioner limits, a limit of 0 included ("launch none")."""
    return tuple(sorted(provisioner.limited | set(provisioner.limits.names())))


@dataclass(frozen=True)
class Room:
    """What a Provisioner's limits still allow, in the resources they name (a resource with none
    left stays named: Resources drops zeros)."""

    names: tuple[str, ...]
    left: Resources

    def allows(self, instance_type: InstanceType) -> bool:
        """Whether a node of the type fits what the limits leave."""
        # The packer asks this for every type it ranks: the maps read directly.
        left, capacity = self.left.amounts, instance_type.capacity.amounts
        return all(
            (1.0 if n == NODES else capacity.get(n, 0.0)) <= left.get(n, 0.0) + EPS for n in self.names
        )

    def charge(self, instance_type: InstanceType) -> Resources:
        """What a node of the type takes from the room."""
        return Resources({n: amount(instance_type, n) for n in self.names})

    def holds(self, charged: Resources) -> bool:
        return all(charged.get(n) <= self.left.get(n) + EPS for n in self.names)

    def __add__(self, freed: Resources) -> Room:
        return Room(self.names, self.left + freed)

    def __sub__(self, charged: Resources) -> Room:
        return Room(self.names, self.left - charged)

    def describe(self) -> str:
        return ", ".join(f"{n} {max(self.left.get(n), 0):g} left" for n in self.names)


Headroom = dict[str, Room]


def headroom(provisioners: Sequence[Provisioner], usage: Mapping[str, Resources]) -> Headroom:
    """What each limited Provisioner may still launch; Provisioners without limits are absent."""
    result = {}
    for provisioner in provisioners:
        if limited := names(provisioner):
            used = usage.get(provisioner.name, Resources())
            left = Resources({n: provisioner.limits.get(n) - used.get(n) for n in limited})
            result[provisioner.name] = Room(limited, left)
    return result


def exhausted(provisioner: str, room: Room | None) -> str:
    left = room.describe() if room else ""
    return f"provisioner {provisioner} {EXCEEDED}: no instance type fits what its limits leave ({left})"


def apply(
    nodes: Sequence[PlannedNode], provisioners: Sequence[Provisioner], usage: Mapping[str, Resources]
) -> tuple[list[PlannedNode], list[Unschedulable]]:
    """Keep nodes in order while their Provisioner's limits allow the cheapest option that fits;
    a node's options shrink to those that do. Returns the nodes kept and the pods of those dropped."""
    limited_by = {p.name: names(p) for p in provisioners}
    if not any(limited_by.values()):
        return list(nodes), []
    by_name = {p.name: p for p in provisioners}
    used = {name: usage.get(name, Resources()) for name in by_name}
    kept: list[PlannedNode] = []
    dropped: list[Unschedulable] = []
    for node in nodes:
        limit, limited = by_name[node.provisioner].limits, limited_by[node.provisioner]
        if not limited:
            kept.append(node)
            continue
        base = used[node.provisioner]
        # Read once per node: an option's check is then its own capacity only.
        bounds = [(n, base.get(n), limit.get(n) + EPS) for n in limited if n != NODES]
        # A node counts 1 towards `nodes` whatever its type: that bound holds for all options or none.
        nodes_left = NODES not in limited or base.get(NODES) + 1.0 <= limit.get(NODES) + EPS
        room = _within(node.options, bounds) if nodes_left else []
        if not room:
            reason = f"provisioner {node.provisioner} {EXCEEDED}: " + ", ".join(
                f"{n} usage {base.get(n):g} + node {amount(node.options[0], n):g} > limit {limit.get(n):g}"
                for n in limited
            )
            dropped.extend(Unschedulable(pod, reason) for pod in node.pods)
            continue
        mins = min_values(by_name[node.provisioner])
        if mins and len(room) < len(node.options) and (short := minvalues.unmet(room, mins, _offered(node))):
            # Karpenter RemoveInstanceTypeOptionsByPriceAndMinValues: fewer options may break minValues.
            reason = (
                f"provisioner {node.provisioner} {EXCEEDED}: the types within them miss "
                + minvalues.reason(short)
            )
            dropped.extend(Unschedulable(pod, reason) for pod in node.pods)
            continue
        if room[0] is not node.options[0]:
            cheapest = min(
                (
                    o
                    for o in room[0].offerings
                    if o.available and o.zone in node.zones and o.capacity_type in node.capacity_types
                ),
                key=lambda o: o.price,
            )
            node = replace(
                node,
                options=tuple(room),
                zone=cheapest.zone,
                capacity_type=cheapest.capacity_type,
                price=cheapest.price,
            )
        used[node.provisioner] = base + Resources({n: amount(node.options[0], n) for n in limited})
        kept.append(node)
    return kept, dropped


def _within(
    options: Sequence[InstanceType], bounds: Sequence[tuple[str, float, float]]
) -> list[InstanceType]:
    """The options whose capacity keeps every (name, used, limit) bound: a plain loop over the
    capacity maps, as this runs for every option of every limited node of every solve."""
    result = []
    for option in options:
        amounts = option.capacity.amounts
        for name, used, top in bounds:
            if not used + amounts.get(name, 0.0) <= top:
                break
        else:
            result.append(option)
    return result


def _offered(node: PlannedNode) -> Requirements:
    """The zones and capacity types the node may launch in, as requirements (minValues counts them)."""
    return Requirements.of(
        {
            wk.ZONE: ValueSet(False, frozenset(node.zones), allow_absent=False),
            wk.CAPACITY_TYPE: ValueSet(False, frozenset(node.capacity_types), allow_absent=False),
        }
    )
