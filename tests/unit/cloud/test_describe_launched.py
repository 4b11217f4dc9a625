"""Reading launched instances back: EC2 is eventually consistent right after CreateFleet, so the
provider reads again with the SETTLE backoff, and gives up with what it has (or NotFound)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from extender import retry
from extender.cloud.aws import instances, provider
from extender.cloud.types import Instance, InstanceNotFoundError


def instance(dns: str = "ip-10-0-0-1.ec2.internal") -> Instance:
    return Instance(
        id="i-1",
        instance_type="m5.large",
        zone="us-west-2a",
        capacity_type="on-demand",
        private_dns_name=dns,
        provider_id="aws:///us-west-2a/i-1",
        state="pending",
    )


def describe_with(monkeypatch: pytest.MonkeyPatch, answers: list[Any]) -> tuple[Any, list[float]]:
    def describe(_ec2: Any, _ids: Any) -> list[Instance]:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(instances, "describe", describe)
    slept: list[float] = []
    fake = SimpleNamespace(clients=SimpleNamespace(ec2=None), _sleep=slept.append)
    return fake, slept


def test_reads_again_until_the_dns_name_shows(monkeypatch) -> None:
    fake, slept = describe_with(monkeypatch, [InstanceNotFoundError("i-1"), [instance("")], [instance()]])
    (found,) = provider.AWSCloudProvider._describe_launched(fake, ["i-1"])
    assert found.private_dns_name and len(slept) == 2
    assert all(0 <= s <= retry.SETTLE.ceiling(n) for n, s in enumerate(slept))


def test_after_the_last_attempt_returns_what_ec2_shows(monkeypatch) -> None:
    fake, _ = describe_with(monkeypatch, [[instance("")]] * provider.DESCRIBE_ATTEMPTS)
    assert provider.AWSCloudProvider._describe_launched(fake, ["i-1"]) == [instance("")]


def test_an_instance_ec2_never_shows_is_not_found(monkeypatch) -> None:
    fake, _ = describe_with(monkeypatch, [InstanceNotFoundError("i-1")] * provider.DESCRIBE_ATTEMPTS)
    with pytest.raises(InstanceNotFoundError):
        provider.AWSCloudProvider._describe_launched(fake, ["i-1"])
