"""Parsing Price List and spot history payloads, and the layered price book's per-price sources."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from extender.cloud.aws import pricing
from extender.scheduling.pricing import Shape

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


BUILT_IN = "built-in us-east-1 table 2026-07-20"


def test_layered_book_takes_each_price_from_the_first_source_that_knows_it(tmp_path) -> None:
    live = pricing.PriceTable(
        source="api", on_demand={"m5.large": 0.096}, spot={("m5.large", "us-west-2a"): 0.03}
    )
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"onDemand": {"m5.large": 0.5, "c5.large": 0.09}, "spot": {"c5.large": 0.02}}))
    book = pricing.layered_book(live, str(path))

    def answer(name: str, capacity_type: str, zone: str = "") -> tuple[float, str]:
        price = book.price(name, capacity_type, SHAPE, zone)
        return round(price.value, 5), price.source

    assert answer("m5.large", "on-demand") == (0.096, "on-demand api")
    assert answer("m5.large", "spot", "us-west-2a") == (0.03, "spot api")
    # No spot price for this zone anywhere: the on-demand price of the first source that has one.
    assert answer("m5.large", "spot", "us-west-2b") == (0.096, "spot unknown: on-demand api")
    assert answer("c5.large", "on-demand") == (0.09, "on-demand prices.json")
    assert answer("c5.large", "spot", "us-west-2a") == (0.02, "spot prices.json")
    # In neither the API answer nor the file: the built-in us-east-1 table, whatever the region.
    assert answer("c5.2xlarge", "on-demand") == (0.34, f"on-demand {BUILT_IN}")
    assert answer("c5.2xlarge", "spot") == (0.34, f"spot unknown: on-demand {BUILT_IN}")
    assert answer("z9.large", "on-demand")[1] == "estimate"
    assert answer("z9.large", "spot")[1] == "estimate"


def test_without_api_or_price_file_prices_come_from_the_built_in_table(tmp_path) -> None:
    silent = pricing.PriceTable(source="api")
    for price_file in ("", str(tmp_path / "missing.json")):
        book = pricing.layered_book(silent, price_file)
        assert [b.origin for b in book.chain()] == ["api", BUILT_IN]
        assert book.price("c5.2xlarge", "on-demand", SHAPE).source == f"on-demand {BUILT_IN}"


def test_placeholder_spot_history_leaves_the_on_demand_table_price() -> None:
    moto_rows = [row("0.00001", datetime(2006, 1, 2, 15, 4, 5, tzinfo=UTC), instance_type="c5.2xlarge")]
    live = pricing.PriceTable(source="api", spot=pricing.parse_spot_history(moto_rows))
    price = pricing.layered_book(live, "").price("c5.2xlarge", "spot", SHAPE, "us-west-2a")
    assert (price.value, price.source) == (0.34, f"spot unknown: on-demand {BUILT_IN}")
