"""`reserved_catalog`, which provisioning's gather and consolidation's worker both call (issue 35):
before, only provisioning attached a pool's reservations, so consolidation never saw a free slot."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from extender.api.capacity_reservations import CapacityReservation, ReservationTerm
from extender.cloud.fake import FakeCloudProvider
from extender.cloud.reserved import reserved_catalog
from extender.cloud.types import CloudError
from tests.unit.scheduling.builders import catalog, make_provisioner

TERM = ReservationTerm(id="cr-0abc")
FOUND = CapacityReservation(
    id="cr-0abc", instance_type="m5.large", zone="us-west-2a", owner_id="012345678901", available=1, total=1
)


@dataclass
class ReservingCloud(FakeCloudProvider):
    """The fake cloud answering DescribeCapacityReservations with one reservation."""

    def capacity_reservations(self, terms: Sequence[ReservationTerm]) -> list[CapacityReservation]:
        self._record("capacity_reservations", terms)
        return [FOUND] if TERM in terms else []


def selecting() -> list:
    pool = make_provisioner("default")
    return [replace(pool, provider=replace(pool.provider, capacity_reservation_selector=(TERM,)))]


def test_the_pools_reservations_become_reserved_offerings() -> None:
    types, pools = reserved_catalog(ReservingCloud(), list(catalog()), selecting())
    large = next(t for t in types if t.name == "m5.large")
    assert [o.reservation_id for o in large.offerings if o.capacity_type == "reserved"] == ["cr-0abc"]
    assert pools[0].capacity_reservations == frozenset({"cr-0abc"})


def test_a_pool_without_terms_asks_nothing_and_an_error_leaves_the_catalog(caplog) -> None:
    cloud = ReservingCloud()
    plain = [make_provisioner("default")]
    assert reserved_catalog(cloud, list(catalog()), plain) == (list(catalog()), plain)
    assert "capacity_reservations" not in cloud.verbs()
    cloud.fail_next("capacity_reservations", CloudError("describing capacity reservations, throttled"))
    pools = selecting()
    assert reserved_catalog(cloud, list(catalog()), pools) == (list(catalog()), pools)
    assert "Resolving capacity reservations for provisioner default failed" in caplog.text
