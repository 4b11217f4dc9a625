"""Reserved offerings in the pure solver (plain data).

Rules and their sources:
- aws/karpenter-provider-aws v1.14.1 `pkg/providers/instancetype/offering/reserved_capacity_resolver.go`:
  one `reserved` offering per reservation of the type, priced at the on-demand price / 10,000,000,
  available only with instances left, in one of the type's zones, not an expiring capacity block.
- kubernetes-sigs/karpenter `pkg/controllers/provisioning/scheduling/reservationmanager.go` and the
  "Reserved Instance Types" context of `scheduling/suite_test.go` ("shouldn't fallback to on-demand or
  spot when compatible reserved offerings are available", "should correctly track reservations shared
  across nodepools", "should handle multiple pods on reserved nodes"): no more nodes planned into a
  reservation than it has left, the smaller count when two pools' catalogs disagree, the rest
  falling back to the pools' other capacity types.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from extender.api import labels as wk
from extender.api.capacity_reservations import CAPACITY_BLOCK, CapacityReservation
from extender.api.provisioner import Provisioner
from extender.scheduling import reservations
from extender.scheduling.solver import solve
from tests.unit.scheduling.builders import catalog, make_pod, make_provisioner

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
LARGE = {"key": wk.INSTANCE_TYPE, "operator": "In", "values": ["m5.large"]}


def pool(
    name: str = "default", kinds: tuple[str, ...] = ("reserved", "on-demand"), *extra: Any
) -> Provisioner:
    return make_provisioner(
        name, requirements=[{"key": wk.CAPACITY_TYPE, "operator": "In", "values": list(kinds)}, *extra]
    )


def reservation(rid: str = "cr-0abc", available: int = 2, **fields: Any) -> CapacityReservation:
    base: dict[str, Any] = {
        "id": rid,
        "instance_type": "m5.large",
        "zone": "us-west-2a",
        "owner_id": "012345678901",
        "available": available,
        "total": max(available, 2),
    }
    base.update(fields)
    return CapacityReservation(**base)


def one_each(n: int) -> list:
    # 1.5 CPU: one pod per m5.large.
    return [make_pod(f"p{i}", cpu="1.5") for i in range(n)]


def test_a_reserved_offering_is_priced_at_on_demand_over_ten_million() -> None:
    types, _ = reservations.attach(list(catalog()), [pool()], {"default": [reservation()]})
    large = next(t for t in types if t.name == "m5.large")
    on_demand = min(o.price for o in large.offerings if o.capacity_type == "on-demand")
    (reserved,) = [o for o in large.offerings if o.capacity_type == "reserved"]
    assert reserved.price == on_demand / 10_000_000 and reserved.price < on_demand
    assert (reserved.zone, reserved.reservation_id, reserved.reservation_capacity) == (
        "us-west-2a",
        "cr-0abc",
        2,
    )
    assert reserved.available


def test_a_reservation_is_used_first_then_on_demand_for_what_it_cannot_hold() -> None:
    types, pools = reservations.attach(
        list(catalog()), [pool("default", ("reserved", "on-demand"), LARGE)], {"default": [reservation()]}
    )
    plan = solve(one_each(3), pools, types)
    kinds = sorted((n.capacity_type, n.reservation_id) for n in plan.nodes)
    assert kinds == [("on-demand", ""), ("reserved", "cr-0abc"), ("reserved", "cr-0abc")]
    reserved = [n for n in plan.nodes if n.reservation_id]
    # Launched into the reservation: its type and zone only.
    assert all(n.zones == ("us-west-2a",) and n.capacity_types == ("reserved",) for n in reserved)
    assert [t.name for n in reserved for t in n.options] == ["m5.large", "m5.large"]
    fallback = next(n for n in plan.nodes if not n.reservation_id)
    assert "reserved" not in fallback.capacity_types
    assert plan.total_price == sum(n.price for n in plan.nodes)


def test_reserved_is_chosen_over_cheaper_spot() -> None:
    types, pools = reservations.attach(
        list(catalog()),
        [pool("default", ("reserved", "spot", "on-demand"), LARGE)],
        {"default": [reservation()]},
    )
    plan = solve(one_each(1), pools, types)
    assert [n.capacity_type for n in plan.nodes] == ["reserved"]


def test_pods_share_a_reserved_node() -> None:
    types, pools = reservations.attach(list(catalog()), [pool()], {"default": [reservation(available=1)]})
    plan = solve([make_pod(f"p{i}", cpu="100m") for i in range(4)], pools, types)
    assert [(n.capacity_type, len(n.pods)) for n in plan.nodes] == [("reserved", 4)]


def test_a_pool_allowing_only_reserved_leaves_pods_pending_past_the_count() -> None:
    types, pools = reservations.attach(
        list(catalog()), [pool("default", ("reserved",))], {"default": [reservation(available=1)]}
    )
    plan = solve(one_each(2), pools, types)
    assert [n.capacity_type for n in plan.nodes] == ["reserved"]
    assert [u.reason for u in plan.unschedulable] == [reservations.EXHAUSTED]


def test_a_reservation_two_pools_share_is_counted_once() -> None:
    a = pool("a", ("reserved", "on-demand"), LARGE)
    b = pool("b", ("reserved", "on-demand"), LARGE)
    pods = [
        make_pod("x", cpu="1.5", nodeSelector={wk.PROVISIONER_NAME: "a"}),
        make_pod("y", cpu="1.5", nodeSelector={wk.PROVISIONER_NAME: "b"}),
    ]
    types, pools = reservations.attach(
        list(catalog()), [a, b], {"a": [reservation(available=1)], "b": [reservation(available=1)]}
    )
    plan = solve(pods, pools, types)
    assert sorted(n.capacity_type for n in plan.nodes) == ["on-demand", "reserved"]


def test_a_pool_sees_only_the_reservations_its_node_class_selects() -> None:
    types, pools = reservations.attach(
        list(catalog()), [pool("mine"), pool("other")], {"mine": [reservation()]}
    )
    other = next(p for p in pools if p.name == "other")
    plan = solve([make_pod("p", cpu="1.5", nodeSelector={wk.PROVISIONER_NAME: "other"})], pools, types)
    assert [n.capacity_type for n in plan.nodes] == ["on-demand"] and not other.capacity_reservations


def test_no_offering_from_an_expiring_block_an_empty_or_an_interruptible_reservation() -> None:
    block = reservation("cr-block", reservation_type=CAPACITY_BLOCK, end_time=NOW + timedelta(minutes=39))
    block = replace(block, state=block.state_at(NOW))
    for unusable in (
        block,
        reservation(available=0),
        reservation(interruptible=True),
        reservation(zone="eu-west-1a"),
    ):
        types, _ = reservations.attach(list(catalog()), [pool()], {"default": [unusable]})
        large = next(t for t in types if t.name == "m5.large")
        assert not any(o.available for o in large.offerings if o.capacity_type == "reserved"), unusable
    live_block = replace(block, end_time=NOW + timedelta(minutes=41))
    live_block = replace(live_block, state=live_block.state_at(NOW))
    types, _ = reservations.attach(list(catalog()), [pool()], {"default": [live_block]})
    large = next(t for t in types if t.name == "m5.large")
    assert any(o.available for o in large.offerings if o.capacity_type == "reserved")


def test_without_reservations_plans_are_unchanged() -> None:
    plain = solve(one_each(2), [pool()], list(catalog()))
    types, pools = reservations.attach(list(catalog()), [pool()], {})
    assert types == list(catalog()) and solve(one_each(2), pools, types).nodes == plain.nodes
