"""The API server version behind every launch's AMI (extender/cluster/version.py, issue 13).

Before the fix the controller asked GET /version on every launch with no retry: in the chaos run
one injected 503 on it aborted a 12-node launch group. The version is now read once, retried on
transient errors and refreshed rarely, keeping the known value when a refresh fails.
"""

from __future__ import annotations

import pytest

from extender.cluster.errors import ClusterError, Unavailable
from extender.cluster.version import ServerVersion


class Reads:
    def __init__(self, *outcomes: str | Exception) -> None:
        self.outcomes = list(outcomes)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_503_on_the_first_read_is_retried() -> None:
    reads = Reads(Unavailable("reading the API server version: 503", status=503), "1.37")
    version = ServerVersion(reads, sleep=lambda _s: None)
    assert version() == "1.37"
    assert reads.calls == 2


def test_the_version_is_read_once_per_refresh_period() -> None:
    reads, clock = Reads("1.37", "1.38"), Clock()
    version = ServerVersion(reads, refresh_seconds=600, clock=clock, sleep=lambda _s: None)
    assert [version(), version()] == ["1.37", "1.37"]
    assert reads.calls == 1
    clock.now = 601
    assert version() == "1.38"


def test_a_failed_refresh_keeps_the_known_version() -> None:
    down = Unavailable("reading the API server version: 503", status=503)
    reads, clock = Reads("1.37", *([down] * 4)), Clock()
    version = ServerVersion(reads, refresh_seconds=600, clock=clock, sleep=lambda _s: None)
    assert version() == "1.37"
    clock.now = 601
    assert version() == "1.37"


def test_an_error_that_is_not_transient_is_raised_when_no_version_is_known() -> None:
    version = ServerVersion(Reads(ClusterError("reading the API server version: 403 forbidden", status=403)))
    with pytest.raises(ClusterError):
        version()
