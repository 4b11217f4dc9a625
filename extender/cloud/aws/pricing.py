"""Live EC2 prices: the Price List API for on-demand, DescribeSpotPriceHistory for spot.

`PricingProvider.price_book()` is what the catalog asks for. Each table is fetched at most once
per TTL and the last good table survives a failed refresh. The fallback chain per price is
API -> price file (settings.aws.price_file) -> the built-in us-east-1 table -> the documented
estimate (types in no table); spot history -> the on-demand price of the same chain. Spot history
placeholders (moto's 0.00001, timestamps before EC2 Spot existed) count as no answer. The book
keeps where each price came from, and the catalog logs it.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from cachetools import TLRUCache

from extender.cloud.aws import errors
from extender.scheduling.pricing import PriceBook, built_in
from extender.settings import AWSSettings

log = logging.getLogger(__name__)

ON_DEMAND_TTL_SECONDS = 12 * 3600.0
SPOT_TTL_SECONDS = 3600.0
# A failed or empty fetch is retried this much later, not a whole TTL later.
RETRY_SECONDS = 300.0
# EC2 Spot did not exist before this day, so any older price is a placeholder (moto answers 2006-01-02).
SPOT_EPOCH = datetime(2009, 12, 14, tzinfo=UTC)
# moto's constant spot price; no real offering has ever cost this little.
PLACEHOLDER_SPOT_PRICE = 0.00001

SOURCE_API = "api"
SOURCE_SPOT_HISTORY = "spot-price-history"

_REGION_NAMES_FILTERS = (
    ("serviceCode", "AmazonEC2"),
    ("preInstalledSw", "NA"),
    ("operatingSystem", "Linux"),
    ("capacitystatus", "Used"),
    ("marketoption", "OnDemand"),
    ("tenancy", "Shared"),
)


@dataclass(frozen=True)
class PriceTable:
    """Prices in USD per instance-hour from one source; spot keys are (instance type, zone)."""

    source: str
    on_demand: Mapping[str, float] = field(default_factory=dict)
    spot: Mapping[tuple[str, str], float] = field(default_factory=dict)


def on_demand_filters(region: str, product_family: str = "Compute Instance") -> list[dict[str, str]]:
    terms = (("regionCode", region), ("productFamily", product_family), *_REGION_NAMES_FILTERS)
    return [{"Type": "TERM_MATCH", "Field": name, "Value": value} for name, value in terms]


def parse_price_list(items: Iterable[str | Mapping[str, Any]], currency: str = "USD") -> dict[str, float]:
    """instance type -> hourly on-demand price from GetProducts `PriceList` entries (JSON strings)."""
    prices: dict[str, float] = {}
    for item in items:
        doc = json.loads(item) if isinstance(item, str) else item
        name = doc.get("product", {}).get("attributes", {}).get("instanceType")
        if not name:
            continue
        for term in doc.get("terms", {}).get("OnDemand", {}).values():
            for dimension in term.get("priceDimensions", {}).values():
                raw = dimension.get("pricePerUnit", {}).get(currency)
                price = float(raw) if raw else 0.0
                # A 0.00 dimension is a reserved-capacity or BYOL artefact, not a price.
                if price > 0:
                    prices[name] = min(price, prices.get(name, price))
    return prices


def parse_spot_history(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], float]:
    """(type, zone) -> latest believable spot price; placeholders and pre-Spot timestamps are unknown."""
    latest: dict[tuple[str, str], tuple[datetime, float]] = {}
    for row in rows:
        stamp = row.get("Timestamp")
        if isinstance(stamp, str):
            stamp = datetime.fromisoformat(stamp)
        price = float(row.get("SpotPrice") or 0.0)
        if stamp is None or stamp < SPOT_EPOCH or price <= PLACEHOLDER_SPOT_PRICE:
            continue
        key = (row["InstanceType"], row["AvailabilityZone"])
        if key not in latest or latest[key][0] < stamp:
            latest[key] = (stamp, price)
    return {key: price for key, (_, price) in latest.items()}


def fetch_on_demand(pricing: Any, region: str) -> dict[str, float]:
    paginator = pricing.get_paginator("get_products")
    items: list[str] = []
    for family in ("Compute Instance", "Compute Instance (bare metal)"):
        for page in paginator.paginate(
            ServiceCode="AmazonEC2",
            Filters=on_demand_filters(region, family),
            PaginationConfig={"PageSize": 100},
        ):
            items.extend(page.get("PriceList", []))
    return parse_price_list(items, "CNY" if region.startswith("cn-") else "USD")


def fetch_spot(ec2: Any, now: datetime) -> dict[tuple[str, str], float]:
    paginator = ec2.get_paginator("describe_spot_price_history")
    rows: list[Mapping[str, Any]] = []
    for page in paginator.paginate(
        ProductDescriptions=["Linux/UNIX", "Linux/UNIX (Amazon VPC)"], StartTime=now, EndTime=now
    ):
        rows.extend(page.get("SpotPriceHistory", []))
    return parse_spot_history(rows)


class PricingProvider:
    """Cached live price tables; `live()` never raises, an empty table means "ask the next source"."""

    def __init__(
        self,
        *,
        ec2: Any,
        pricing: Any,
        settings: AWSSettings,
        timer: Callable[[], float] = time.monotonic,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._ec2 = ec2
        self._pricing = pricing
        self._settings = settings
        self._clock = clock
        self._lock = threading.Lock()
        ttls = {"on_demand": ON_DEMAND_TTL_SECONDS, "spot": SPOT_TTL_SECONDS}

        def time_to_use(kind: str, fetched: tuple[Mapping[Any, float], bool], now: float) -> float:
            return now + (ttls[kind] if fetched[1] else RETRY_SECONDS)

        self._fresh: TLRUCache[str, tuple[Mapping[Any, float], bool]] = TLRUCache(
            maxsize=2, ttu=time_to_use, timer=timer
        )
        # The last non-empty table of each kind: a failed refresh keeps serving it.
        self._last_good: dict[str, Mapping[Any, float]] = {}

    def price_book(self) -> PriceBook:
        return layered_book(self.live(), self._settings.price_file)

    def live(self) -> PriceTable:
        with self._lock:
            on_demand = self._table("on_demand", self._fetch_on_demand)
            spot = self._table("spot", self._fetch_spot)
        return PriceTable(source=SOURCE_API, on_demand=dict(on_demand), spot=dict(spot))

    def _table(self, kind: str, fetch: Callable[[], Mapping[Any, float]]) -> Mapping[Any, float]:
        if kind in self._fresh:
            return self._fresh[kind][0]
        try:
            table = fetch()
        except (ClientError, BotoCoreError) as err:
            log.warning(
                "Fetching %s prices failed (%s); using %s",
                kind,
                errors.code_of(err),
                "the previous table" if kind in self._last_good else "the next price source",
            )
            table = {}
        if table:
            self._last_good[kind] = table
        # Failures are cached too (RETRY_SECONDS): a dead API costs one call per retry, not per catalog.
        self._fresh[kind] = (table or self._last_good.get(kind, {}), bool(table))
        return self._fresh[kind][0]

    def _fetch_on_demand(self) -> Mapping[str, float]:
        if not self._settings.pricing_api:
            return {}
        return fetch_on_demand(self._pricing, self._settings.region)

    def _fetch_spot(self) -> Mapping[tuple[str, str], float]:
        return fetch_spot(self._ec2, self._clock())


def layered_book(live: PriceTable, price_file: str) -> PriceBook:
    """The fallback chain: live API tables, then the price file (if set and readable), then the
    built-in table, then the estimate (extender.scheduling.pricing)."""
    rest = built_in()
    if price_file:
        try:
            rest = PriceBook.from_file(price_file)
        except (OSError, ValueError) as err:
            log.warning("Ignoring price file %s: %s", price_file, err)
    return PriceBook(on_demand=live.on_demand, spot_by_zone=live.spot, origin=live.source, fallback=rest)
