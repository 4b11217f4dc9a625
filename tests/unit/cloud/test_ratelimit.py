"""The launch token bucket, driven by a fake clock."""

from __future__ import annotations

import pytest

from extender.cloud.aws.ratelimit import TokenBucket


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_burst_is_free_then_callers_wait_at_the_rate() -> None:
    clock = Clock()
    bucket = TokenBucket(rate=2.0, burst=3, timer=clock, sleep=clock.sleep)
    assert [bucket.acquire() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.acquire() == pytest.approx(0.5)
    assert bucket.acquire() == pytest.approx(0.5)
    clock.now += 10  # idle time refills, but never beyond the burst
    assert [bucket.acquire() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.acquire() == pytest.approx(0.5)


def test_invalid_limits_are_refused() -> None:
    with pytest.raises(ValueError):
        TokenBucket(rate=0)
