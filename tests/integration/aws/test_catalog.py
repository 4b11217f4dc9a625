"""The priced catalog from moto: zonal offerings per subnet zone, capacity types, price sources, caching."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from extender.cloud.aws.instancetypes import CatalogProvider
from extender.cloud.aws.provider import AWSCloudProvider
from extender.scheduling.pricing import PriceBook

pytestmark = pytest.mark.integration


def test_catalog_offers_each_type_in_every_seeded_zone_for_both_capacity_types(
    provider: AWSCloudProvider, aws: Any
) -> None:
    started = time.perf_counter()
    catalog = {item.name: item for item in provider.get_instance_types()}
    elapsed = time.perf_counter() - started

    m5 = catalog["m5.large"]
    assert {(o.zone, o.capacity_type) for o in m5.offerings} == {
        (zone, ct) for zone in aws.subnets for ct in ("on-demand", "spot")
    }
    on_demand = next(o for o in m5.offerings if o.capacity_type == "on-demand")
    assert on_demand.price == pytest.approx(0.096)
    assert on_demand.price_source == "on-demand built-in us-east-1 table 2026-07-20"
    assert all(o.zone in aws.subnets for item in catalog.values() for o in item.offerings)
    # Karpenter's filters: no bare metal, no FPGA types.
    assert "m5.metal" not in catalog and "f1.2xlarge" not in catalog
    print(f"\ncatalog: {len(catalog)} instance types from moto in {elapsed:.2f}s (first build or cached)")


def narrow_listing(clients: Any) -> list[str]:
    """Ask moto for two types instead of 1,395 (the caching is the point, not the listing); the calls."""
    calls: list[str] = []

    def narrow(params: dict[str, Any], **_: Any) -> dict[str, Any]:
        calls.append("DescribeInstanceTypes")
        return {**params, "InstanceTypes": ["m5.large", "c5.large"]}

    clients.ec2.meta.events.register("provide-client-params.ec2.DescribeInstanceTypes", narrow)
    return calls


def test_catalog_is_listed_once_per_ttl_and_refreshed_after_it_without_blocking(
    clients: Any, clock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="extender.cloud.aws.instancetypes")
    calls = narrow_listing(clients)
    refreshes: list[Any] = []
    # The background refresh is run when the test says, to see what a batch gets meanwhile.
    catalog = CatalogProvider(clients.ec2, price_book=PriceBook, timer=clock, spawn=refreshes.append)

    first = catalog.get(["us-west-2a", "us-west-2b"])
    assert [item.name for item in first] == ["c5.large", "m5.large"]
    assert catalog.get(["us-west-2b", "us-west-2a"]) is first
    clock.tick(299)
    assert catalog.get(["us-west-2a", "us-west-2b"]) is first
    assert len(calls) == 1 and not refreshes
    clock.tick(2)
    # Past the TTL: the cached catalog is served while one refresh is scheduled, not one per caller.
    assert catalog.get(["us-west-2a", "us-west-2b"]) is first
    assert catalog.get(["us-west-2a", "us-west-2b"]) is first
    assert len(refreshes) == 1 and len(calls) == 1
    refreshes.pop()()
    assert len(calls) == 2
    second = catalog.get(["us-west-2a", "us-west-2b"])
    assert second is not first and [item.name for item in second] == ["c5.large", "m5.large"]
    # A book without tables falls through to the built-in table, and the offering says so.
    built_in = "on-demand built-in us-east-1 table 2026-07-20"
    assert {o.price_source for o in first[0].offerings} == {built_in, f"spot unknown: {built_in}"}
    # ... and the catalog log says which sources priced it.
    assert (
        "Discovered 2 instance type(s) in zones ['us-west-2a', 'us-west-2b']" in caplog.text
        and f"offering prices by source: {{'{built_in}': 4, 'spot unknown: {built_in}': 4}}" in caplog.text
    )


def test_a_failed_catalog_refresh_keeps_the_last_good_catalog_and_retries(
    clients: Any, clock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from botocore.exceptions import ClientError

    calls = narrow_listing(clients)
    refreshes: list[Any] = []
    catalog = CatalogProvider(clients.ec2, price_book=PriceBook, timer=clock, spawn=refreshes.append)
    first = catalog.get(["us-west-2a"])

    def throttled(**_: Any) -> None:
        raise ClientError(
            {"Error": {"Code": "RequestLimitExceeded", "Message": "slow down"}}, "DescribeInstanceTypes"
        )

    clients.ec2.meta.events.register("before-call.ec2.DescribeInstanceTypes", throttled)
    clock.tick(301)
    assert catalog.get(["us-west-2a"]) is first
    refreshes.pop()()
    assert "Refreshing instance types in zones ['us-west-2a'] failed, keeping the cached ones" in caplog.text
    assert catalog.get(["us-west-2a"]) is first and not refreshes  # no retry storm
    clock.tick(30)
    clients.ec2.meta.events.unregister("before-call.ec2.DescribeInstanceTypes", throttled)
    assert catalog.get(["us-west-2a"]) is first
    refreshes.pop()()
    assert catalog.get(["us-west-2a"]) is not first
    assert len(calls) == 3
