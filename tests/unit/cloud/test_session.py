"""boto3 clients from AWSSettings: endpoint, regions, retry policy (building clients makes no calls)."""

from __future__ import annotations

import pytest

from extender.cloud.aws.session import make_clients, pricing_region
from extender.settings import AWSSettings


@pytest.mark.parametrize(
    ("region", "expected"),
    [
        ("us-west-2", "us-east-1"),
        ("eu-north-1", "eu-central-1"),
        ("ap-southeast-2", "ap-south-1"),
        ("cn-north-1", "cn-northwest-1"),
    ],
)
def test_pricing_is_asked_in_the_region_that_serves_it(region: str, expected: str) -> None:
    assert pricing_region(region) == expected


def test_clients_use_the_configured_endpoint_and_region_with_adaptive_retries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    clients = make_clients(AWSSettings(region="eu-west-1", endpoint_url="http://127.0.0.1:5999"))
    assert clients.ec2.meta.endpoint_url == "http://127.0.0.1:5999"
    assert clients.ec2.meta.region_name == "eu-west-1"
    assert clients.pricing.meta.region_name == "eu-central-1"
    assert clients.ec2.meta.config.retries["mode"] == "adaptive"
    # Pricing has fallbacks behind it: a single attempt, no retries.
    assert clients.pricing.meta.config.retries["total_max_attempts"] == 1
