"""Reserved offerings: capacity reservations as the cheapest offerings, never planned past their count.

`with_reservations` adds one `reserved` offering per reservation to its instance type, as Karpenter
AWS v1.14.1's ReservedCapacityResolver (`pkg/providers/instancetype/offering/
reserved_capacity_resolver.go`) does: priced at the type's on-demand price / 10,000,000 (pre-paid,
so free, while keeping the types' relative order for consolidation), available only while it has
instances left, is in one of the type's zones and is not an expiring capacity block.

`assign` then holds a plan to the counts, as the Karpenter scheduler's reservation manager does
(`pkg/controllers/provisioning/scheduling/reservationmanager.go`): nodes take reservation slots in
plan order; a node whose reservations are used up launches as on-demand or spot instead (its other
offerings, cheapest first), and its pods are unschedulable only if it has no other offering.
`offering_allows` matches requirements on the capacity-reservation labels against an offering as
Karpenter's offering requirements do (`reserved_capacity_resolver.go`: a reserved offering is
`capacity-reservation-id In [id]`, `-type In [type]`, `-interruptible In [true|false]`; the
on-demand and spot offerings of `offering/resolver.go` are `DoesNotExist` on all three), so a pod or
NodePool selecting a reservation gets only that reservation's offerings.
Pure: the reservations and their counts come in as data.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace

from extender.api import labels as wk
from extender.api.capacity_reservations import ACTIVE, CapacityReservation
from extender.api.provisioner import Provisioner
from extender.scheduling.instancetypes import InstanceType, Offering, OfferingKey
from extender.scheduling.plan import PlannedNode, Unschedulable
from extender.scheduling.requirements import Requirements

#: Karpenter's divisor of the on-demand price for a reserved offering.
RESERVED_PRICE_DIVISOR = 10_000_000.0
EXHAUSTED = "its capacity reservations are used up and its requirements allow no other capacity type"
USED_UP = "the capacity reservations it selects have no instances left"


def _on_demand_price(instance_type: InstanceType) -> float:
    prices = [o.price for o in instance_type.offerings if o.capacity_type == wk.CAPACITY_TYPE_ON_DEMAND]
    return min(prices, default=0.0)


def reserved_price(instance_type: InstanceType) -> float:
    """A reserved offering's $/h: pre-paid, so near 0, but in the types' on-demand order (Karpenter's
    ODCR design, "Consolidating between Capacity Reservations")."""
    return _on_demand_price(instance_type) / RESERVED_PRICE_DIVISOR


def with_reservations(
    catalog: Sequence[InstanceType], reservations: Sequence[CapacityReservation]
) -> list[InstanceType]:
    """The catalog with each reservation's offering added to its type (types it names not in the
    catalog are left out, as Karpenter offers reservations only for types it knows)."""
    by_type: dict[str, list[CapacityReservation]] = {}
    for reservation in reservations:
        by_type.setdefault(reservation.instance_type, []).append(reservation)
    if not by_type:
        return list(catalog)
    result = []
    for item in catalog:
        found = by_type.get(item.name)
        if not found:
            result.append(item)
            continue
        zones = {o.zone for o in item.offerings}
        price = reserved_price(item)
        reserved = [
            Offering(
                zone=r.zone,
                capacity_type=wk.CAPACITY_TYPE_RESERVED,
                price=price,
                # Interruptible reservations need a fleet karpy does not build: listed, not launched into.
                available=r.available > 0 and r.zone in zones and r.state == ACTIVE and not r.interruptible,
                price_source="reservation",
                reservation_id=r.id,
                reservation_capacity=r.available,
                reservation_type=r.reservation_type,
                interruptible=r.interruptible,
            )
            for r in found
        ]
        result.append(item.with_offerings((*item.offerings, *reserved)))
    return result


def offering_labels(offering: Offering) -> dict[str, str]:
    """The capacity-reservation labels a node launched as this offering carries (none unless reserved)."""
    if not offering.reservation_id:
        return {}
    return {
        wk.CAPACITY_RESERVATION_ID: offering.reservation_id,
        wk.CAPACITY_RESERVATION_TYPE: offering.reservation_type,
        wk.CAPACITY_RESERVATION_INTERRUPTIBLE: str(offering.interruptible).lower(),
    }


def offering_allows(offering: Offering, reqs: Requirements) -> bool:
    """Whether the offering meets `reqs` on the capacity-reservation labels (an on-demand or spot
    offering has none: it fails `In` and `Exists`, meets `NotIn` and `DoesNotExist`)."""
    labels: dict[str, str] | None = None
    for key, value_set in reqs:
        if key in wk.RESERVATION_LABELS:
            labels = offering_labels(offering) if labels is None else labels
            value = labels.get(key)
            if not (value_set.allow_absent if value is None else value_set.contains(value)):
                return False
    return True


def used_up(instance_types: Iterable[InstanceType], reqs: Requirements) -> bool:
    """Whether `reqs` select some reservation of these types, and every one selected is full."""
    selected = [
        o for t in instance_types for o in t.offerings if o.reservation_id and offering_allows(o, reqs)
    ]
    return bool(selected) and not any(o.available and o.reservation_capacity > 0 for o in selected)


def selects(reqs: Requirements) -> bool:
    """Whether `reqs` say anything on the capacity-reservation labels (else every offering passes)."""
    return any(key in wk.RESERVATION_LABELS for key, _ in reqs.items)


def restricted(instance_type: InstanceType, reqs: Requirements) -> InstanceType:
    """The type with only the offerings `reqs` allow on the capacity-reservation labels."""
    if not selects(reqs):
        return instance_type
    return instance_type.with_offerings(o for o in instance_type.offerings if offering_allows(o, reqs))


def own_offerings(instance_types: Sequence[InstanceType], provisioner: Provisioner) -> Sequence[InstanceType]:
    """The types with only the reserved offerings of reservations the pool's NodeClass selects
    (the catalog holds those of every pool; Karpenter resolves offerings per NodeClass)."""
    own = provisioner.capacity_reservations
    if not any(o.reservation_id for t in instance_types for o in t.offerings):
        return instance_types
    return [
        t.with_offerings(o for o in t.offerings if not o.reservation_id or o.reservation_id in own)
        if any(o.reservation_id for o in t.offerings)
        else t
        for t in instance_types
    ]


def attach(
    catalog: Sequence[InstanceType],
    provisioners: Sequence[Provisioner],
    found: Mapping[str, Sequence[CapacityReservation]],
) -> tuple[list[InstanceType], list[Provisioner]]:
    """The catalog with the reserved offerings of every pool's reservations (`found`: pool name ->
    what its NodeClass selects), and each pool knowing which are its own."""
    unique = {r.id: r for pool in found.values() for r in pool}
    pools = [
        replace(p, capacity_reservations=frozenset(r.id for r in found.get(p.name, ())))
        if found.get(p.name) or p.capacity_reservations
        else p
        for p in provisioners
    ]
    return with_reservations(catalog, list(unique.values())), pools


def _usable(
    node: PlannedNode, offering: Offering, instance_type: InstanceType, unavailable: Collection[OfferingKey]
) -> bool:
    return (
        offering.available
        and offering.zone in node.zones
        and offering.capacity_type in node.capacity_types
        and (instance_type.name, offering.zone, offering.capacity_type) not in unavailable
    )


def assign(
    nodes: Sequence[PlannedNode], unavailable: Collection[OfferingKey] = frozenset()
) -> tuple[list[PlannedNode], list[Unschedulable]]:
    """Each node in a reservation with a slot left (the cheapest such offering of its options), or
    launched as another capacity type; (nodes, pods of nodes left with no offering)."""
    left: dict[str, int] = {}
    for node in nodes:
        for option in node.options:
            for o in option.reserved:
                # Two pools' catalogs may disagree on one reservation's count: the smaller holds.
                left[o.reservation_id] = min(
                    left.get(o.reservation_id, o.reservation_capacity), o.reservation_capacity
                )
    if not left:
        return list(nodes), []
    planned: list[PlannedNode] = []
    dropped: list[Unschedulable] = []
    for node in nodes:
        reserved = [
            (o.price, rank, option, o)
            for rank, option in enumerate(node.options)
            for o in option.offerings
            if o.reservation_id
            and left.get(o.reservation_id, 0) > 0
            and _usable(node, o, option, unavailable)
        ]
        if reserved:
            _, _, option, offering = min(reserved, key=lambda item: item[:2])
            left[offering.reservation_id] -= 1
            planned.append(_reserved(node, option, offering))
        elif (other := _unreserved(node, unavailable)) is not None:
            planned.append(other)
        else:
            dropped += [Unschedulable(pod, EXHAUSTED) for pod in node.pods]
    return planned, dropped


def _reserved(node: PlannedNode, option: InstanceType, offering: Offering) -> PlannedNode:
    """The node launched into the offering's reservation: that type, zone and reservation only."""
    return replace(
        node,
        options=(option,),
        zones=(offering.zone,),
        capacity_types=(wk.CAPACITY_TYPE_RESERVED,),
        zone=offering.zone,
        capacity_type=wk.CAPACITY_TYPE_RESERVED,
        price=offering.price,
        reservation_id=offering.reservation_id,
    )


def _unreserved(node: PlannedNode, unavailable: Collection[OfferingKey]) -> PlannedNode | None:
    """The node as on-demand or spot: its options with such an offering, cheapest first."""
    kinds = tuple(k for k in node.capacity_types if k != wk.CAPACITY_TYPE_RESERVED)
    if node.capacity_type != wk.CAPACITY_TYPE_RESERVED and kinds == node.capacity_types:
        return node
    bare = replace(node, capacity_types=kinds)
    ranked = []
    for rank, option in enumerate(node.options):
        offers = [o for o in option.offerings if _usable(bare, o, option, unavailable)]
        if offers:
            ranked.append((min(o.price for o in offers), rank, option, min(offers, key=lambda o: o.price)))
    if not ranked:
        return None
    ranked.sort(key=lambda item: item[:2])
    cheapest = ranked[0][3]
    return replace(
        bare,
        options=tuple(item[2] for item in ranked),
        zones=tuple(z for z in node.zones if any(o.zone == z for item in ranked for o in item[2].offerings)),
        zone=cheapest.zone,
        capacity_type=cheapest.capacity_type,
        price=cheapest.price,
    )
