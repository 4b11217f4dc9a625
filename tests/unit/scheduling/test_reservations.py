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
from extender.scheduling.requirements import Requirements
from extender.scheduling.solver import solve
from tests import builders
from tests.unit.scheduling.builders import catalog, make_provisioner

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
    return [builders.pod(f"p{i}", cpu="1.5") for i in range(n)]


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
    plan = solve([builders.pod(f"p{i}", cpu="100m") for i in range(4)], pools, types)
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
        builders.pod("x", cpu="1.5", nodeSelector={wk.PROVISIONER_NAME: "a"}),
        builders.pod("y", cpu="1.5", nodeSelector={wk.PROVISIONER_NAME: "b"}),
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
    plan = solve([builders.pod("p", cpu="1.5", nodeSelector={wk.PROVISIONER_NAME: "other"})], pools, types)
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


# Requirements on the capacity-reservation labels. Source: aws/karpenter-provider-aws v1.14
# `pkg/apis/v1/labels.go` (init adds capacity-reservation-id/-type to karpv1.WellKnownLabels) and the
# offering requirements of `offering/reserved_capacity_resolver.go` (a reserved offering: id, type,
# interruptible In its values) and `offering/resolver.go` (on-demand/spot: DoesNotExist on all three);
# its e2e "should schedule against a specific reservation ID" (test/suites/scheduling).
RID = wk.CAPACITY_RESERVATION_ID


def two_reservations() -> tuple[list, list[Provisioner]]:
    return reservations.attach(
        list(catalog()),
        [pool("default", ("reserved", "on-demand"), LARGE)],
        {"default": [reservation("cr-0abc", available=2), reservation("cr-0def", available=1)]},
    )


def test_a_pod_selecting_a_reservation_is_planned_only_into_it() -> None:
    types, pools = two_reservations()
    pods = [builders.pod(f"p{i}", cpu="1.5", nodeSelector={RID: "cr-0def"}) for i in range(2)]
    plan = solve(pods, pools, types)
    # cr-0def holds one: the second pod stays pending, never on cr-0abc nor on-demand.
    assert [(n.capacity_type, n.reservation_id) for n in plan.nodes] == [("reserved", "cr-0def")]
    assert [u.reason for u in plan.unschedulable] == [reservations.EXHAUSTED]


def test_a_pod_selecting_a_reservation_the_pool_does_not_select_stays_pending() -> None:
    types, pools = two_reservations()
    plan = solve([builders.pod("p", cpu="1.5", nodeSelector={RID: "cr-0zzz"})], pools, types)
    assert not plan.nodes
    (why,) = plan.unschedulable
    assert RID in why.reason and "cr-0zzz" in why.reason


def test_a_pod_requiring_a_reservation_label_never_gets_an_on_demand_node() -> None:
    types, pools = reservations.attach(
        list(catalog()),
        [pool("default", ("reserved", "on-demand"), LARGE)],
        {"default": [reservation(available=0)]},
    )
    for selector in ({RID: "cr-0abc"}, {wk.CAPACITY_RESERVATION_TYPE: "default"}):
        plan = solve([builders.pod("p", cpu="1.5", nodeSelector=selector)], pools, types)
        assert not plan.nodes and len(plan.unschedulable) == 1, selector


def test_a_pod_may_keep_off_reservations() -> None:
    types, pools = two_reservations()
    away = {"key": RID, "operator": "DoesNotExist"}
    pod = builders.pod("p", cpu="1.5", affinity=_required(away))
    plan = solve([pod], pools, types)
    assert [(n.capacity_type, n.reservation_id) for n in plan.nodes] == [("on-demand", "")]


def test_type_and_interruptible_select_reservations_too() -> None:
    types, pools = reservations.attach(
        list(catalog()),
        [pool("default", ("reserved", "on-demand"), LARGE)],
        {
            "default": [
                reservation("cr-0abc"),
                reservation("cr-0blk", reservation_type=CAPACITY_BLOCK, end_time=NOW + timedelta(days=1)),
            ]
        },
    )
    plan = solve(
        [builders.pod("p", cpu="1.5", nodeSelector={wk.CAPACITY_RESERVATION_TYPE: CAPACITY_BLOCK})],
        pools,
        types,
    )
    assert [n.reservation_id for n in plan.nodes] == ["cr-0blk"]
    plan = solve(
        [builders.pod("p", cpu="1.5", nodeSelector={wk.CAPACITY_RESERVATION_INTERRUPTIBLE: "false"})],
        pools,
        types,
    )
    assert [n.capacity_type for n in plan.nodes] == ["reserved"]


def test_a_node_pool_requirement_restricts_its_offerings_to_one_reservation() -> None:
    only = {"key": RID, "operator": "In", "values": ["cr-0def"]}
    types, pools = reservations.attach(
        list(catalog()),
        [pool("default", ("reserved",), LARGE, only)],
        {"default": [reservation("cr-0abc", available=2), reservation("cr-0def", available=1)]},
    )
    plan = solve(one_each(2), pools, types)
    assert [n.reservation_id for n in plan.nodes] == ["cr-0def"]
    assert [u.reason for u in plan.unschedulable] == [reservations.EXHAUSTED]


def test_offering_labels_are_set_only_on_reserved_offerings() -> None:
    types, _ = two_reservations()
    large = next(t for t in types if t.name == "m5.large")
    by_kind = {o.reservation_id or o.capacity_type: reservations.offering_labels(o) for o in large.offerings}
    assert by_kind["on-demand"] == {} and by_kind["spot"] == {}
    assert by_kind["cr-0abc"] == {
        RID: "cr-0abc",
        wk.CAPACITY_RESERVATION_TYPE: "default",
        wk.CAPACITY_RESERVATION_INTERRUPTIBLE: "false",
    }


def _required(*expressions: dict[str, Any]) -> dict[str, Any]:
    terms = [{"matchExpressions": list(expressions)}]
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}


def test_used_up_tells_a_full_selected_reservation_from_an_unknown_one() -> None:
    types, _ = reservations.attach(
        list(catalog()), [pool()], {"default": [reservation("cr-0abc", available=0), reservation("cr-0def")]}
    )
    wants = lambda rid: Requirements.from_labels({RID: rid})  # noqa: E731
    assert reservations.used_up(types, wants("cr-0abc"))
    assert not reservations.used_up(types, wants("cr-0def"))  # has room
    assert not reservations.used_up(types, wants("cr-0zzz"))  # not a reservation of these types
