"""EC2NodeClass capacityReservationSelectorTerms and the reservations they select.

Rules ported from aws/karpenter-provider-aws v1.14.1: `pkg/apis/v1/ec2nodeclass.go`
(CapacityReservationSelectorTerm: the CEL rules, the `^cr-[0-9a-z]+$` / `^[0-9]{12}$` patterns,
the instanceMatchCriteria enum), `pkg/apis/v1/ec2nodeclass_status.go` CapacityReservationFromEC2
(a capacity block is `expiring` 40 minutes before its end; a default ODCR never is) and
`pkg/providers/capacityreservation/types.go` QueriesFromSelectorTerms (what a term selects).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from marshmallow import ValidationError

from extender.api import capacity_reservations as cr
from extender.api.ec2nodeclass import load_ec2nodeclass
from tests.integration.v1_cel_cases import NODECLASS_CASES
from tests.unit.api.test_selector_terms import manifest

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def reservation(**fields: Any) -> cr.CapacityReservation:
    base: dict[str, Any] = {
        "id": "cr-0123456789abcdef0",
        "instance_type": "m5.large",
        "zone": "us-west-2a",
        "owner_id": "012345678901",
        "available": 2,
        "total": 2,
        "tags": {"team": "ml"},
    }
    base.update(fields)
    return cr.CapacityReservation(**base)


def test_the_loader_agrees_with_karpenters_cel_cases_on_capacity_reservation_terms() -> None:
    # ec2nodeclass_validation_cel_test.go, Context("CapacityReservationSelectorTerms") (ported in
    # v1_cel_cases.py and applied to the API server by tests/integration/test_v1_crd_validation.py).
    cases = [
        c
        for c in NODECLASS_CASES
        if not c.update
        and (
            "capacityReservationSelectorTerms" in c.manifest()["spec"]
            or c.name == "should succeed when capacity group selector terms is set to nil"
        )
    ]
    for case in cases:
        try:
            load_ec2nodeclass(case.manifest(), cluster_name="demo")
            loaded = True
        except ValidationError:
            loaded = False
        assert loaded == case.stored, case.name
    assert len(cases) == 20


def node_class(terms: list[Any]) -> dict[str, Any]:
    obj = manifest()
    obj["spec"]["capacityReservationSelectorTerms"] = terms
    return obj


def test_terms_load_into_the_node_class_in_order() -> None:
    terms = [
        {"id": "cr-56fac701cc1951b03"},
        {"tags": {"key": "foo"}, "ownerID": "012345678901", "instanceMatchCriteria": "targeted"},
    ]
    loaded = load_ec2nodeclass(node_class(terms), cluster_name="demo").node_class
    assert [t.as_dict() for t in loaded.capacity_reservation_selector] == terms


def test_a_bad_term_is_refused_with_its_path_and_nothing_else_is_lost() -> None:
    obj = node_class(
        [
            {"id": "cr-1"},
            {"name": "x"},
            {"id": "cr-2", "ownerID": "012345678901"},
        ]
    )
    with pytest.raises(ValidationError) as err:
        load_ec2nodeclass(obj, cluster_name="demo")
    assert err.value.messages == [
        "spec.capacityReservationSelectorTerms[1].name: unknown field "
        "(a term selects by [tags id ownerID instanceMatchCriteria])",
        "spec.capacityReservationSelectorTerms[2].id: 'id' is mutually exclusive, cannot be set along "
        "with other fields in a capacity reservation selector term",
    ]


@pytest.mark.parametrize(
    ("term", "selects"),
    [
        (cr.ReservationTerm(id="cr-0123456789abcdef0"), True),
        (cr.ReservationTerm(id="cr-other"), False),
        (cr.ReservationTerm(tags={"team": "ml"}), True),
        (cr.ReservationTerm(tags={"team": "*"}), True),  # "*": any value of the key (tag-key filter)
        (cr.ReservationTerm(tags={"team": "web"}), False),
        (cr.ReservationTerm(tags={"team": "ml", "env": "*"}), False),  # tags are ANDed
        (cr.ReservationTerm(tags={"team": "ml"}, owner_id="999999999999"), False),
        (cr.ReservationTerm(instance_match_criteria="targeted"), True),
        (cr.ReservationTerm(instance_match_criteria="open"), False),
    ],
)
def test_a_term_selects_as_describe_capacity_reservations_filters(
    term: cr.ReservationTerm, selects: bool
) -> None:
    assert term.matches(reservation()) is selects


def test_only_a_capacity_block_expires_40_minutes_before_its_end() -> None:
    end = NOW + timedelta(minutes=40)
    block = reservation(reservation_type=cr.CAPACITY_BLOCK, end_time=end)
    assert block.state_at(NOW - timedelta(seconds=1)) == cr.ACTIVE
    assert block.state_at(NOW) == cr.EXPIRING
    # A default ODCR with an end date is active until it ends; its instances become on-demand.
    assert reservation(end_time=end).state_at(NOW) == cr.ACTIVE
    assert replace(block, state=block.state_at(NOW)).status() == {
        "availabilityZone": "us-west-2a",
        "id": "cr-0123456789abcdef0",
        "instanceMatchCriteria": "targeted",
        "instanceType": "m5.large",
        "ownerID": "012345678901",
        "reservationType": "capacity-block",
        "interruptible": False,
        "state": "expiring",
        "endTime": "2026-12-01T12:40:00Z",
    }


def test_selected_leaves_out_ended_reservations_and_duplicates() -> None:
    ended = reservation(id="cr-ended", end_time=NOW)
    live = reservation()
    terms = (cr.ReservationTerm(tags={"team": "ml"}), cr.ReservationTerm(id=live.id))
    assert cr.selected([live, ended, live], terms, NOW) == [live]


def test_selecting_reservations_drifts_no_node() -> None:
    # Karpenter AWS pkg/apis/v1/ec2nodeclass.go: CapacityReservationSelectorTerms is `hash:"ignore"`.
    from extender.api.provisioner import Provisioner
    from extender.api.provisioner_hash import provisioner_hash

    without = load_ec2nodeclass(manifest(), cluster_name="demo").node_class
    selecting = load_ec2nodeclass(node_class([{"tags": {"team": "ml"}}]), cluster_name="demo").node_class
    assert selecting.capacity_reservation_selector and not without.capacity_reservation_selector
    assert provisioner_hash(Provisioner(name="p", provider=without)) == provisioner_hash(
        Provisioner(name="p", provider=selecting)
    )
