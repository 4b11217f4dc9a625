"""Issue 26, found while probing: with kube-apiserver stopped for 30 s (lease 10 s), the leader gauge
stayed 1 the whole time and nothing was logged when leadership lapsed. The elector now gives
leadership up on the first round after renew_deadline without a renewal: gauge 0, a WARNING,
and the on_stopped callback (the leader label), as client-go's leader election does."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

from extender.cluster import leases
from extender.cluster.errors import ClusterError
from extender.lifecycle import leader as leader_module
from extender.lifecycle import metrics
from extender.lifecycle.leader import LeaderElector
from extender.settings import LeaderElectionSettings


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Store:
    """The Lease as the API server holds it; `down` makes every call fail as a stopped server does."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.down = False

    def get(self, _kube: Any, _ns: str, _name: str) -> dict[str, Any] | None:
        if self.down:
            raise ClusterError("connection refused")
        return self.lease

    def write(self, *args: Any) -> dict[str, Any]:
        if self.down:
            raise ClusterError("connection refused")
        self.lease = {"metadata": {"resourceVersion": "1"}, "spec": dict(args[-1])}
        return self.lease


def test_leadership_lapses_with_a_log_line_and_the_gauge_once_renewals_fail(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    store, clock = Store(), Clock()
    monkeypatch.setattr(leases, "get", store.get)
    monkeypatch.setattr(leases, "create", store.write)
    monkeypatch.setattr(leases, "update", store.write)
    stopped = threading.Event()
    settings = LeaderElectionSettings(lease_duration_seconds=10, renew_deadline_seconds=7)
    elector = LeaderElector(
        kube=None, settings=settings, identity="me", monotonic=clock, on_stopped=stopped.set
    )
    rounds: list[Any] = []
    monkeypatch.setattr(leader_module, "run_forever", lambda one_round, *a, **k: rounds.append(one_round))
    elector.run(threading.Event())  # captures the round; release() sees no leadership yet
    (one_round,) = rounds
    one_round()
    assert elector.is_leader() and metrics.IS_LEADER._value.get() == 1
    store.down = True
    caplog.set_level(logging.INFO, logger="karpy")
    for _ in range(6):  # 6 s of failed renewals: still within renew_deadline
        clock.now += 1
        with pytest.raises(ClusterError):
            one_round()
    assert metrics.IS_LEADER._value.get() == 1 and not stopped.is_set()
    clock.now += 1
    with pytest.raises(ClusterError):
        one_round()
    assert not elector.is_leader() and metrics.IS_LEADER._value.get() == 0 and stopped.is_set()
    lost = [r for r in caplog.records if "Lost leader lease" in r.getMessage()]
    assert len(lost) == 1 and lost[0].levelno == logging.WARNING
    assert "not renewed within 7s" in lost[0].getMessage()
