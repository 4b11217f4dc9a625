"""hack/gen_prices.py regenerates the built-in table from a Price List answer (recorded shape, no network)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from extender.scheduling.pricing import BUILT_IN_TABLE, PriceBook, Shape
from hack import gen_prices
from tests.unit.cloud.test_pricing import price_list_item


class RecordedPricing:
    """A pricing client answering GetProducts pages as AWS shapes them (PriceList of JSON strings)."""

    def __init__(self, pages: dict[str, list[list[str]]]) -> None:
        self.pages = pages
        self.filters: list[dict[str, str]] = []

    def get_paginator(self, operation: str) -> RecordedPricing:
        assert operation == "get_products"
        return self

    def paginate(self, **kwargs: Any) -> Iterator[dict[str, Any]]:
        filters = {f["Field"]: f["Value"] for f in kwargs["Filters"]}
        self.filters.append(filters)
        for page in self.pages.get(filters["productFamily"], []):
            yield {"PriceList": page, "FormatVersion": "aws_v1"}


def test_regenerated_table_reads_back_as_the_built_in_format(tmp_path: Path, monkeypatch) -> None:
    client = RecordedPricing(
        {
            "Compute Instance": [
                [price_list_item("m5.large", "0.0960000000"), price_list_item("c7g.large", "0.0725")],
                [price_list_item("c5.large", "0.0850000000", extra_dimension="0.0000000000")],
            ],
            "Compute Instance (bare metal)": [[price_list_item("m5.metal", "4.608")]],
        }
    )
    monkeypatch.setattr("boto3.client", lambda *args, **kwargs: client)
    output = tmp_path / "prices.json"
    assert gen_prices.main(["--region", "eu-west-1", "--output", str(output)]) == 0
    document = json.loads(output.read_text())
    assert document["region"] == "eu-west-1" and document["currency"] == "USD"
    assert list(document["onDemand"]) == ["c5.large", "c7g.large", "m5.large", "m5.metal"]
    assert {f["regionCode"] for f in client.filters} == {"eu-west-1"}
    book = PriceBook.from_file(output)
    assert book.on_demand_price("c5.large", Shape(2, 4)).value == 0.085


def test_an_empty_answer_leaves_the_table_alone(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr("boto3.client", lambda *args, **kwargs: RecordedPricing({}))
    output = tmp_path / "prices.json"
    assert gen_prices.main(["--output", str(output)]) == 1
    assert not output.exists()


def test_shipped_table_has_the_generated_layout() -> None:
    shipped = json.loads((Path(gen_prices.OUTPUT)).read_text())
    assert Path(gen_prices.OUTPUT).as_posix().endswith(f"extender/{BUILT_IN_TABLE}")
    rebuilt = gen_prices.table_document(shipped["onDemand"], shipped["region"], shipped["snapshot"])
    assert rebuilt == shipped


@pytest.mark.parametrize("region", ["us-east-1", "cn-north-1"])
def test_currency_follows_the_region(region: str) -> None:
    assert gen_prices.table_document({}, region, "2026-01-01")["currency"] == (
        "CNY" if region[:3] == "cn-" else "USD"
    )
