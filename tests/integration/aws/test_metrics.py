"""cloud.metrics.decorate over the real AWS provider: durations by method, errors by code."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from extender.cloud import metrics
from extender.cloud.aws.provider import AWSCloudProvider
from extender.cloud.types import InstanceNotFoundError

pytestmark = pytest.mark.integration


def _sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_decorated_provider_times_calls_and_counts_errors_by_code(provider: AWSCloudProvider) -> None:
    decorated = metrics.decorate(provider)
    listed_before = _sample("karpy_cloudprovider_duration_seconds_count", provider="aws", method="list")
    errors_before = _sample(
        "karpy_cloudprovider_errors_total", provider="aws", method="get", code="InvalidInstanceID.NotFound"
    )

    assert isinstance(decorated.list(), list)
    with pytest.raises(InstanceNotFoundError):
        decorated.get("aws:///us-west-2a/i-0123456789abcdef0")

    assert (
        _sample("karpy_cloudprovider_duration_seconds_count", provider="aws", method="list")
        == listed_before + 1
    )
    assert (
        _sample(
            "karpy_cloudprovider_errors_total",
            provider="aws",
            method="get",
            code="InvalidInstanceID.NotFound",
        )
        == errors_before + 1
    )
    assert decorated.name == "aws"
    assert decorated.find_launch("no-such-launch") == []  # extras pass through
