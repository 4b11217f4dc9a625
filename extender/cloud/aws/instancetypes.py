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
from extender.scheduling.poddensity import DEFAULT_DENSITY, PodDensity
from extender.scheduling.pricing import PriceBook

log = logging.getLogger(__name__)

#: Karpenter's InstanceTypesZonesAndOfferingsTTL.
CATALOG_TTL_SECONDS = 300.0
#: A failed background refresh is tried again this much later; the cached catalog serves meanwhile.
REFRESH_RETRY_SECONDS = 30.0


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
    """zones -> priced catalog, refreshed every CATALOG_TTL_SECONDS without blocking a batch.

    The first request for a zone set builds its catalog; after the TTL the cached one is still
    served while one background refresh rebuilds it (a full listing takes seconds, and a batch
    waiting on it is pending pods waiting). A failed refresh keeps the last good catalog and is
    retried after REFRESH_RETRY_SECONDS.
    """

    def __init__(
        self,
        ec2: Any,
        *,
        price_book: Callable[[], PriceBook],
        timer: Callable[[], float] = time.monotonic,
        ttl: float = CATALOG_TTL_SECONDS,
        spawn: Callable[[Callable[[], None]], None] | None = None,
        density: PodDensity = DEFAULT_DENSITY,
    ) -> None:
        self._ec2 = ec2
        self._density = density
        self._price_book = price_book
        self._timer = timer
        self._ttl = ttl
        self._spawn = spawn or _daemon_thread
        self._raw: TTLCache[str, list[dict[str, Any]]] = TTLCache(maxsize=2, ttl=ttl, timer=timer)
        #: zone set -> (catalog, when it is due for a refresh)
        self._catalogs: dict[tuple[str, ...], tuple[list[InstanceType], float]] = {}
        self._refreshing: set[tuple[str, ...]] = set()
        self._lock = threading.Lock()
        self._raw_lock = threading.Lock()

    def get(self, zones: Sequence[str]) -> list[InstanceType]:
        key = tuple(sorted(set(zones)))
        with self._lock:
            cached = self._catalogs.get(key)
            if cached is None:
                catalog = self._build(key)
                self._catalogs[key] = (catalog, self._timer() + self._ttl)
                return catalog
            catalog, due = cached
            if self._timer() >= due and key not in self._refreshing:
                self._refreshing.add(key)
                self._spawn(lambda: self._refresh(key))
            return catalog

    def _refresh(self, key: tuple[str, ...]) -> None:
        try:
            catalog, ttl = self._build(key), self._ttl
        except Exception as err:  # keep serving the last good catalog
            log.warning(
                "Refreshing instance types in zones %s failed, keeping the cached ones, %s", list(key), err
            )
            catalog, ttl = self._catalogs[key][0], REFRESH_RETRY_SECONDS
        with self._lock:
            self._catalogs[key] = (catalog, self._timer() + ttl)
            self._refreshing.discard(key)

    def _raw_listing(self, name: str, fetch: Callable[[Any], list[dict[str, Any]]]) -> list[dict[str, Any]]:
        with self._raw_lock:
            if name not in self._raw:
                self._raw[name] = fetch(self._ec2)
            return self._raw[name]

    def _build(self, zones: tuple[str, ...]) -> list[InstanceType]:
        started = self._timer()
        instance_types = self._raw_listing("types", describe_instance_types)
        offerings = self._raw_listing("offerings", describe_offerings)
        catalog = build_catalog(
            instance_types,
            offerings=offerings,
            zones=zones,
            prices=self._price_book(),
            logger=log,
            density=self._density,
        )
        log.info(
            "Discovered %d instance type(s) in zones %s in %.2fs; offering prices by source: %s",
            len(catalog),
            list(zones),
            self._timer() - started,
            price_sources(catalog),
        )
        return catalog


def _daemon_thread(target: Callable[[], None]) -> None:
    threading.Thread(target=target, name="catalog-refresh", daemon=True).start()
