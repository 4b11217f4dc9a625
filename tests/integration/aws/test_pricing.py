"""Price sources against moto: the Pricing API answers 500 and spot history is a placeholder, so the
fallback chain must land on the price file, or on the built-in table without one."""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from extender.cloud.aws.pricing import PricingProvider
from extender.cloud.aws.session import make_clients
from extender.scheduling.pricing import Price, Shape
from extender.settings import Settings

pytestmark = pytest.mark.integration

M5_LARGE = Shape(cpu=2, memory_gib=8)
BUILT_IN = "built-in us-east-1 table 2026-07-20"


def _pricing(settings: Settings, clock: Any, **changes: Any) -> tuple[PricingProvider, list[str]]:
    aws_settings = dataclasses.replace(settings.aws, **changes)
    clients = make_clients(aws_settings)
    calls: list[str] = []
    clients.pricing.meta.events.register(
        "before-send.pricing.GetProducts", lambda **_: calls.append("GetProducts")
    )
    return PricingProvider(
        ec2=clients.ec2, pricing=clients.pricing, settings=aws_settings, timer=clock
    ), calls


def test_api_failure_falls_back_to_the_price_file(
    settings: Settings, clock: Any, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    caplog.set_level(logging.WARNING, logger="extender.cloud.aws.pricing")
    price_file = tmp_path / "prices.json"
    price_file.write_text(json.dumps({"onDemand": {"m5.large": 0.1}}))
    pricing, calls = _pricing(settings, clock, pricing_api=True, price_file=str(price_file))

    book = pricing.price_book()

    assert calls == ["GetProducts"]  # one HTTP request: the pricing client does not retry
    assert "Fetching on_demand prices failed (500); using the next price source" in caplog.text
    on_demand = book.price("m5.large", "on-demand", M5_LARGE)
    assert (on_demand.value, on_demand.source) == (pytest.approx(0.1), "on-demand prices.json")
    # moto's spot history is the 0.00001 placeholder dated 2006: unknown, so the on-demand price.
    spot = book.price("m5.large", "spot", M5_LARGE, "us-west-2a")
    assert (spot.value, spot.source) == (pytest.approx(0.1), "spot unknown: on-demand prices.json")
    # Types the file does not list: the built-in table.
    assert book.price("c5.large", "on-demand", M5_LARGE).source == f"on-demand {BUILT_IN}"


def test_without_api_or_file_prices_come_from_the_built_in_table(settings: Settings, clock: Any) -> None:
    pricing, calls = _pricing(settings, clock, pricing_api=False, price_file="")
    book = pricing.price_book()
    assert calls == []
    assert book.price("m5.large", "on-demand", M5_LARGE) == Price(0.096, f"on-demand {BUILT_IN}")
    spot = book.price("m5.large", "spot", M5_LARGE, "us-west-2a")
    assert spot == Price(0.096, f"spot unknown: on-demand {BUILT_IN}")


def test_a_failed_fetch_is_retried_after_the_retry_interval_not_per_call(
    settings: Settings, clock: Any
) -> None:
    pricing, calls = _pricing(settings, clock, pricing_api=True)
    pricing.price_book()
    pricing.price_book()
    assert calls == ["GetProducts"]
    clock.tick(301)
    pricing.price_book()
    assert calls == ["GetProducts", "GetProducts"]


def test_an_unreadable_price_file_is_skipped_with_a_warning(
    settings: Settings, clock: Any, tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    broken = tmp_path / "prices.json"
    broken.write_text("{not json")
    pricing, _ = _pricing(settings, clock, pricing_api=False, price_file=str(broken))
    assert pricing.price_book().price("m5.large", "on-demand", M5_LARGE).source == f"on-demand {BUILT_IN}"
    assert "Ignoring price file" in caplog.text
