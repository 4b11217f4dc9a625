"""Parsing Price List and spot history payloads, and the layered price book's per-price sources."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from extender.cloud.aws import pricing
from extender.scheduling.pricing import PriceBook, Shape

SHAPE = Shape(cpu=2, memory_gib=8)


def price_list_item(instance_type: str, usd: str, extra_dimension: str | None = None) -> str:
    dimensions = {"SKU.T.D1": {"unit": "Hrs", "pricePerUnit": {"USD": usd}}}
    if extra_dimension is not None:
        dimensions["SKU.T.D2"] = {"unit": "Hrs", "pricePerUnit": {"USD": extra_dimension}}
    return json.dumps(
        {
            "product": {
                "productFamily": "Compute Instance",
                "attributes": {"instanceType": instance_type},
                "sku": "SKU",
            },
            "serviceCode": "AmazonEC2",
            "terms": {"OnDemand": {"SKU.T": {"priceDimensions": dimensions, "sku": "SKU"}}},
        }
    )


def test_price_list_gives_the_hourly_price_per_type_ignoring_zero_dimensions() -> None:
    items = [
        price_list_item("m5.large", "0.0960000000", extra_dimension="0.0000000000"),
        price_list_item("c5.large", "0.085"),
    ]
    assert pricing.parse_price_list(items) == {"m5.large": 0.096, "c5.large": 0.085}


def test_price_list_skips_items_without_an_instance_type() -> None:
    item = json.dumps({"product": {"attributes": {}}, "terms": {}})
    assert pricing.parse_price_list([item]) == {}


def test_on_demand_filters_match_linux_shared_tenancy_in_the_region() -> None:
    filters = {f["Field"]: f["Value"] for f in pricing.on_demand_filters("us-west-2")}
    assert filters == {
        "regionCode": "us-west-2",
        "productFamily": "Compute Instance",
        "serviceCode": "AmazonEC2",
        "preInstalledSw": "NA",
        "operatingSystem": "Linux",
        "capacitystatus": "Used",
        "marketoption": "OnDemand",
        "tenancy": "Shared",
    }


def row(price: str, stamp: datetime, zone: str = "us-west-2a", instance_type: str = "m5.large") -> dict:
    return {"InstanceType": instance_type, "AvailabilityZone": zone, "SpotPrice": price, "Timestamp": stamp}


def test_spot_history_keeps_the_latest_price_per_type_and_zone() -> None:
    rows = [
        row("0.031", datetime(2026, 11, 1, tzinfo=UTC)),
        row("0.035", datetime(2026, 12, 1, tzinfo=UTC)),
        row("0.040", datetime(2026, 12, 1, tzinfo=UTC), zone="us-west-2b"),
    ]
    assert pricing.parse_spot_history(rows) == {
        ("m5.large", "us-west-2a"): 0.035,
        ("m5.large", "us-west-2b"): 0.040,
    }


@pytest.mark.parametrize(
    "placeholder",
    [
        row("0.00001", datetime(2026, 12, 1, tzinfo=UTC)),  # moto's constant price
        row("0.031", datetime(2006, 1, 2, 15, 4, 5, tzinfo=UTC)),  # before EC2 Spot existed
        row("0.031", "2006-01-02 15:04:05+00:00"),  # the same, as moto's string form
    ],
)
def test_spot_placeholders_are_unknown(placeholder: dict) -> None:
    assert pricing.parse_spot_history([placeholder]) == {}


def test_layered_book_takes_each_price_from_the_first_source_that_knows_it() -> None:
    api = PriceBook(
        on_demand={"m5.large": 0.096}, spot_by_zone={("m5.large", "us-west-2a"): 0.03}, origin="api"
    )
    file = PriceBook(
        on_demand={"m5.large": 0.5, "c5.large": 0.085}, spot={"c5.large": 0.02}, origin="prices.json"
    )
    book = pricing.LayeredPriceBook(layers=(api, file))

    def answer(name: str, capacity_type: str, zone: str = "") -> tuple[float, str]:
        price = book.price(name, capacity_type, SHAPE, zone)
        return round(price.value, 5), price.source

    assert answer("m5.large", "on-demand") == (0.096, "on-demand api")
    assert answer("m5.large", "spot", "us-west-2a") == (0.03, "spot api")
    assert answer("m5.large", "spot", "us-west-2b") == (round(0.096 * 0.35, 5), "spot = 0.35 x on-demand api")
    assert answer("c5.large", "on-demand") == (0.085, "on-demand prices.json")
    assert answer("c5.large", "spot", "us-west-2a") == (0.02, "spot prices.json")
    assert answer("z9.large", "on-demand")[1] == "estimate"
    assert answer("z9.large", "spot")[1] == "spot = 0.35 x estimate"


def test_layered_book_without_a_price_file_has_only_the_live_layer(tmp_path) -> None:
    live = pricing.PriceTable(source="api", on_demand={"m5.large": 0.096})
    assert len(pricing.layered_book(live, "").layers) == 1
    missing = tmp_path / "none.json"
    assert len(pricing.layered_book(live, str(missing)).layers) == 1
