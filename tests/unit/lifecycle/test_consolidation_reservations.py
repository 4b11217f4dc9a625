"""Consolidation with capacity reservations (issue 35), as Karpenter AWS's ODCR design
(designs/odcr.md "Pricing/Consolidation") has it: a reserved node is priced as the planner priced it
(on-demand / 10,000,000, `reserved_capacity_resolver.go`), so it is kept rather than replaced by
on-demand or spot, and a node may be consolidated *into* a reservation's free slot ("Consolidating
into Capacity Reserved Instances": the standard algorithm, the reserved offering being cheapest).
Before this, consolidation priced a reserved node at 0 and never saw reserved offerings."""

from __future__ import annotations

from dataclasses import replace

from extender.api import labels as wk
from extender.api.capacity_reservations import CapacityReservation
from extender.lifecycle.consolidation import snapshot
from extender.lifecycle.consolidation.decide import decide
from extender.lifecycle.consolidation.view import ClusterView
from extender.scheduling import reservations

from .test_consolidation import AMD64, catalog, node, pod, provisioner

RESERVED_OR_ON_DEMAND = {"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["reserved", "on-demand"]}


def reservation(instance_type: str, available: int) -> CapacityReservation:
    return CapacityReservation(
        id=f"cr-{instance_type.replace('.', '')}",
        instance_type=instance_type,
        zone="us-west-2a",
        owner_id="012345678901",
        available=available,
        total=max(available, 1),
    )


def reserved_view(*nodes, found: list[CapacityReservation]) -> ClusterView:
    pool = provisioner(requirements=[RESERVED_OR_ON_DEMAND, AMD64])
    types, pools = reservations.attach(list(catalog()), [pool], {"default": found})
    return ClusterView(provisioners=tuple(pools), instance_types=tuple(types), nodes=nodes)


def test_a_reserved_node_is_priced_as_the_planner_prices_it() -> None:
    by_type = {t.name: t for t in catalog()}
    labels = {wk.INSTANCE_TYPE: "m5.large", wk.ZONE: "us-west-2a", wk.CAPACITY_TYPE: "reserved"}
    on_demand = snapshot.price(by_type, {**labels, wk.CAPACITY_TYPE: "on-demand"})
    # Its reservation need not be in the catalog (used up, or no longer selected).
    assert snapshot.price(by_type, labels) == on_demand / reservations.RESERVED_PRICE_DIVISOR > 0
    with_offering, _ = reservations.attach(
        list(catalog()), [provisioner()], {"default": [reservation("m5.large", 1)]}
    )
    assert snapshot.price({t.name: t for t in with_offering}, labels) == snapshot.price(by_type, labels)


def test_an_on_demand_node_is_consolidated_into_a_free_reservation_slot() -> None:
    busy = node("n", "m5.large", [pod("a", "1500m")])
    action = decide(reserved_view(busy, found=[reservation("m5.large", 1)]))
    assert action is not None and action.names == ("n",)
    (replacement,) = action.replacements
    assert (replacement.capacity_type, replacement.reservation_id) == ("reserved", "cr-m5large")
    assert action.price_after < action.price_before / 1_000_000
    # A full reservation offers no slot: the node stays.
    assert decide(reserved_view(busy, found=[reservation("m5.large", 0)])) is None


def test_a_reserved_node_is_not_replaced_by_on_demand_or_spot() -> None:
    """Priced near 0, no on-demand or spot type is cheaper, however oversized the node."""
    on_demand = node("n", "m5.4xlarge", [pod("a", "500m")])
    labels = {**on_demand.node.labels, wk.CAPACITY_TYPE: "reserved"}
    big = replace(
        on_demand,
        node=replace(on_demand.node, labels=labels),
        capacity_type="reserved",
        price=snapshot.price({t.name: t for t in catalog()}, labels),
    )
    assert decide(reserved_view(big, found=[])) is None
    # The same node as on-demand is replaced by a smaller type: the price is what keeps it.
    assert decide(reserved_view(on_demand, found=[])) is not None
