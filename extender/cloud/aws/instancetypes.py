"""EC2 instance types and zonal offerings, and the cached catalog built from them.

`describe_instance_types` / `describe_offerings` return raw boto3 JSON (also used by `karpy plan`).
`CatalogProvider` turns them into scheduling InstanceTypes for a set of zones, priced through the
PricingProvider's fallback chain. The raw listing is slow (a full DescribeInstanceTypes is ~1.7 s
against moto, several pages on AWS), so it is fetched once per TTL and shared by every zone set.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from cachetools import TTLCache

from extender.cloud.aws import errors
from extender.scheduling.catalog import build_catalog
from extender.scheduling.instancetypes import InstanceType
from extender.scheduling.pricing import PriceBook

log = logging.getLogger(__name__)

#: Karpenter's InstanceTypesZonesAndOfferingsTTL.
CATALOG_TTL_SECONDS = 300.0


def describe_instance_types(ec2: Any) -> list[dict[str, Any]]:
    """Every instance type in the region (DescribeInstanceTypes, all pages)."""
    with errors.translated("describing instance types"):
        pages = ec2.get_paginator("describe_instance_types").paginate()
        return [item for page in pages for item in page.get("InstanceTypes", [])]


def describe_offerings(ec2: Any) -> list[dict[str, Any]]:
    """Which type is offered in which availability zone (DescribeInstanceTypeOfferings, all pages)."""
    with errors.translated("describing instance type offerings"):
        pages = ec2.get_paginator("describe_instance_type_offerings").paginate(
            LocationType="availability-zone"
        )
        return [item for page in pages for item in page.get("InstanceTypeOfferings", [])]


def price_sources(catalog: Sequence[InstanceType]) -> dict[str, int]:
    """How many offerings were priced by each source, most used first."""
    counts = Counter(offering.price_source for item in catalog for offering in item.offerings)
    return dict(counts.most_common())


class CatalogProvider:
    """zones -> priced catalog, cached for CATALOG_TTL_SECONDS; concurrent callers share one fetch."""

    def __init__(
        self,
        ec2: Any,
        *,
        price_book: Callable[[], PriceBook],
        timer: Callable[[], float] = time.monotonic,
        ttl: float = CATALOG_TTL_SECONDS,
    ) -> None:
        self._ec2 = ec2
        self._price_book = price_book
        self._timer = timer
        self._raw: TTLCache[str, list[dict[str, Any]]] = TTLCache(maxsize=2, ttl=ttl, timer=timer)
        self._catalogs: TTLCache[tuple[str, ...], list[InstanceType]] = TTLCache(
            maxsize=16, ttl=ttl, timer=timer
        )
        self._lock = threading.Lock()

    def get(self, zones: Sequence[str]) -> list[InstanceType]:
        key = tuple(sorted(set(zones)))
        with self._lock:
            if key not in self._catalogs:
                self._catalogs[key] = self._build(key)
            return self._catalogs[key]

    def _raw_listing(self, name: str, fetch: Callable[[Any], list[dict[str, Any]]]) -> list[dict[str, Any]]:
        if name not in self._raw:
            self._raw[name] = fetch(self._ec2)
        return self._raw[name]

    def _build(self, zones: tuple[str, ...]) -> list[InstanceType]:
        started = self._timer()
        instance_types = self._raw_listing("types", describe_instance_types)
        offerings = self._raw_listing("offerings", describe_offerings)
        catalog = build_catalog(
            instance_types, offerings=offerings, zones=zones, prices=self._price_book(), logger=log
        )
        log.info(
            "Discovered %d instance type(s) in zones %s in %.2fs; offering prices by source: %s",
            len(catalog),
            list(zones),
            self._timer() - started,
            price_sources(catalog),
        )
        return catalog
