"""The one retry policy: capped, jittered, exponential; `call` retries only what it is told to."""

from __future__ import annotations

import threading

import pytest

from extender import retry


def test_ceiling_doubles_then_caps() -> None:
    policy = retry.Backoff(base=0.5, cap=4.0)
    assert [policy.ceiling(n) for n in range(6)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    assert policy.ceiling(10_000) == 4.0


def test_full_jitter_stays_within_the_ceiling() -> None:
    policy = retry.Backoff(base=1.0, cap=8.0)
    assert policy.delay(3, rand=lambda: 0.0) == 0.0
    assert policy.delay(3, rand=lambda: 0.999) == pytest.approx(7.992)


def test_call_retries_transient_errors_then_returns() -> None:
    outcomes = iter([TimeoutError("1"), TimeoutError("2"), "ok"])
    slept: list[float] = []

    def flaky() -> str:
        got = next(outcomes)
        if isinstance(got, Exception):
            raise got
        return got

    assert retry.call(flaky, retry_on=lambda e: isinstance(e, TimeoutError), sleep=slept.append) == "ok"
    assert len(slept) == 2


def test_call_raises_the_last_error_after_its_attempts() -> None:
    calls = []

    def always() -> None:
        calls.append(1)
        raise TimeoutError(f"try {len(calls)}")

    with pytest.raises(TimeoutError, match="try 3"):
        retry.call(always, retry_on=lambda e: True, attempts=3, sleep=lambda s: None)
    assert len(calls) == 3


def test_call_does_not_retry_what_it_is_not_told_to() -> None:
    calls = []

    def wrong() -> None:
        calls.append(1)
        raise ValueError("bad input")

    with pytest.raises(ValueError):
        retry.call(wrong, retry_on=lambda e: isinstance(e, TimeoutError), sleep=lambda s: None)
    assert calls == [1]


def test_loop_backoff_grows_and_resets() -> None:
    pacing = retry.LoopBackoff(retry.Backoff(base=1.0, cap=60.0), rand=lambda: 1.0)
    assert [pacing.failed() for _ in range(4)] == [1.0, 2.0, 4.0, 8.0]
    pacing.succeeded()
    assert pacing.failed() == 1.0
    stop = threading.Event()
    stop.set()
    assert pacing.wait_after_failure(stop) is True
