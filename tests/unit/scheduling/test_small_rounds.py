"""Issue 33 (latency at 1 and 5 pods): the work a first solve or a new request's first round does once
instead of several times gives the answers it gave when done each time.

- `CandidateCache.counted`: the types holding a request with their counts, which `usable`,
  `pod_rate` and the packer's ranking each computed with `fit_count` over the set before;
- `cheapest_offering(..., reserving=False)`: the capacity-reservation check skipped for requirements
  that name no reservation label (`reservations.selects`), asked once per requirement set.
"""

from __future__ import annotations

import math
from dataclasses import replace

from extender.api import labels as wk
from extender.api.provisioner import Provisioner, Requirement
from extender.api.resources import Resources
from extender.scheduling import reservations
from extender.scheduling.candidates import CandidateCache, ProvisionerView, fit_count, vector
from extender.scheduling.instancetypes import InstanceType
from extender.scheduling.pricing import ESTIMATE
from extender.scheduling.requirements import Requirements
from tests.unit.scheduling.builders import catalog

DIMS = ("cpu", "memory", "pods")


def _request(cpu: float, memory_gib: float) -> tuple[float, ...]:
    return vector(Resources({"cpu": cpu, "memory": memory_gib * 2**30, "pods": 1}), DIMS)


def _with_an_unpriced_largest() -> list[InstanceType]:
    """The catalog with its largest types (by allocatable cpu) replaced by one of them priced only
    by the estimate: the one type holding the largest requests."""
    top = max(t.allocatable.cpu for t in catalog())
    largest = next(t for t in catalog() if t.allocatable.cpu == top)
    estimated = [replace(o, price_source=ESTIMATE) for o in largest.offerings]
    return [t for t in catalog() if t.allocatable.cpu < top] + [largest.with_offerings(estimated)]


def test_counted_is_usable_with_each_types_count_and_pod_rate_reads_it() -> None:
    types = _with_an_unpriced_largest()
    view = ProvisionerView.build(Provisioner(name="default"), types, (), DIMS)
    cache = CandidateCache(())
    found = cache.lookup(view, view.requirements, frozenset())
    biggest = max(c.entry.alloc[0] for c in found.candidates if not c.estimated)
    requests = {
        "small": _request(0.5, 1),
        "priced only": _request(3, 12),
        "the estimated type only": _request(biggest + 1, 1),
        "none": _request(10_000, 1),
    }
    for name, request in requests.items():
        # What usable, pod_rate and the ranking computed before `counted`, from the set itself.
        holding = [c for c in found.candidates if fit_count(request, c.entry.alloc)]
        usable = [c for c in holding if not c.estimated] or holding
        holders, counts = cache.counted(found, request)
        assert list(holders) == usable == list(cache.usable(found, request)), name
        assert list(counts) == [fit_count(request, c.entry.alloc) for c in usable], name
        assert cache.pod_rate(found, request) == min(
            (c.offering.price / fit_count(request, c.entry.alloc) for c in usable), default=math.inf
        ), name
    # The cases are the ones named: the estimated type alone holds the large request, none the last.
    assert [c.entry.type for c in cache.usable(found, requests["the estimated type only"])] == types[-1:]
    assert not any(c.estimated for c in cache.usable(found, requests["priced only"]))
    assert cache.pod_rate(found, requests["none"]) == math.inf


def _reserved_catalog() -> list[InstanceType]:
    """The catalog with a reserved offering of m5.large in us-west-2a, reservation cr-1."""
    result = []
    for t in catalog():
        if t.name == "m5.large":
            on_demand = next(o for o in t.offerings if o.capacity_type == "on-demand")
            reserved = replace(
                on_demand,
                capacity_type="reserved",
                price=on_demand.price / 1e7,
                reservation_id="cr-1",
                reservation_type="default",
                reservation_capacity=2,
            )
            t = t.with_offerings((*t.offerings, reserved))
        result.append(t)
    return result


def test_the_reservation_check_is_skipped_only_where_it_cannot_refuse() -> None:
    types = _reserved_catalog()
    by_id = Requirements.from_requirements([Requirement(wk.CAPACITY_RESERVATION_ID, "In", ("cr-1",))])
    off = Requirements.from_requirements([Requirement(wk.CAPACITY_RESERVATION_ID, "DoesNotExist")])
    zone = Requirements.from_requirements([Requirement(wk.ZONE, "In", ("us-west-2a",))])
    cache = CandidateCache(())
    for reqs in (Requirements(), zone):
        assert not reservations.selects(reqs)
        for t in types:
            assert cache.cheapest_offering(t, reqs, reserving=False) == cache.cheapest_offering(t, reqs)
    large = next(t for t in types if t.name == "m5.large")
    # Requirements naming a reservation label still get the check from `lookup`.
    assert cache.cheapest_offering(large, by_id).reservation_id == "cr-1"  # type: ignore[union-attr]
    assert cache.cheapest_offering(large, off).reservation_id == ""  # type: ignore[union-attr]
    pool = Provisioner(name="default", capacity_reservations=frozenset({"cr-1"}))
    view = ProvisionerView.build(pool, types, (), DIMS)
    assert {c.offering.reservation_id for c in cache.lookup(view, by_id, frozenset()).candidates} == {"cr-1"}
    assert "cr-1" not in {c.offering.reservation_id for c in cache.lookup(view, off, frozenset()).candidates}
