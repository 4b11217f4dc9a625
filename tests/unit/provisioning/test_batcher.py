"""The batching window's rules, driven by an injected clock."""

from __future__ import annotations

import threading
import time

from extender.provisioning.batcher import Batcher, Window
from extender.settings import BatchingSettings


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def window(**kw: float) -> tuple[Window, Clock]:
    clock = Clock()
    return Window(BatchingSettings(**kw), clock), clock


def test_empty_window_is_never_due() -> None:
    w, clock = window()
    clock.now += 60
    assert not w.due() and w.deadline() is None


def test_closes_after_idle_second_without_new_pod() -> None:
    w, clock = window()
    w.add({"ns/a": 1})
    clock.now += 0.9
    assert not w.due()
    w.add({"ns/b": 2})  # a new pod resets the idle timer
    clock.now += 0.9
    assert not w.due()
    clock.now += 0.1
    assert w.due()
    batch, waited = w.take()
    assert batch == {"ns/a": 1, "ns/b": 2}
    assert abs(waited - 1.9) < 1e-9
    assert not w.items and w.deadline() is None


def test_a_repeated_pod_does_not_hold_the_window_open() -> None:
    w, clock = window()
    w.add({"ns/a": 1})
    for _ in range(5):
        clock.now += 0.5
        w.add({"ns/a": 2})
    assert w.due()
    assert w.take()[0] == {"ns/a": 2}


def test_closes_at_max_duration_despite_steady_arrivals() -> None:
    w, clock = window(idle_seconds=1.0, max_seconds=10.0)
    for i in range(40):
        w.add({f"ns/p{i}": i})
        if w.due():
            break
        clock.now += 0.5
    assert clock.now - 100.0 == 10.0
    assert len(w.take()[0]) == 21


def test_closes_at_max_pods_and_carries_the_rest() -> None:
    w, _ = window(max_pods=3)
    w.add({f"ns/p{i}": i for i in range(5)})
    assert w.due()
    batch, _ = w.take()
    assert list(batch) == ["ns/p0", "ns/p1", "ns/p2"]
    assert list(w.items) == ["ns/p3", "ns/p4"] and w.deadline() is not None


def test_batcher_wait_returns_after_idle_and_on_stop() -> None:
    batcher = Batcher(BatchingSettings(idle_seconds=0.05, max_seconds=1.0))
    stop = threading.Event()
    started = time.monotonic()
    batcher.add({"ns/a": 1})
    batch, waited = batcher.wait(stop)
    assert batch == {"ns/a": 1}
    assert 0.04 <= waited < 0.5 and time.monotonic() - started < 0.5
    threading.Timer(0.05, stop.set).start()
    assert batcher.wait(stop, poll_seconds=0.01) == ({}, 0.0)


def test_the_watch_does_not_reopen_a_window_for_pods_a_batch_is_placing() -> None:
    from extender.cluster.boundpods import BoundPods
    from extender.provisioning.controller import ProvisioningController
    from extender.settings import Settings
    from extender.state import ClusterState

    state = ClusterState()
    controller = ProvisioningController(
        settings=Settings(),
        kube=None,  # type: ignore[arg-type]
        cloud=None,  # type: ignore[arg-type]
        state=state,
        bound=BoundPods(),
    )
    state.claim(["ns/placing"])
    controller._watched({"ns/placing": {}, "ns/new": {}})
    assert sorted(controller.batcher._window.items) == ["ns/new"]
    state.unclaim(["ns/placing"])
    controller._watched({"ns/placing": {}})
    assert sorted(controller.batcher._window.items) == ["ns/new", "ns/placing"]


def test_a_follower_wait_returns_on_leadership_and_the_window_keeps_its_pods() -> None:
    """Issue 26 (first batch after a failover): a follower waiting with pods in the window only
    looked at leadership once the window closed, then parked them for a window of their own after
    the adoption. `until` ends the wait as soon as it is true; the pods stay, with their times."""
    clock = Clock()
    batcher = Batcher(BatchingSettings(idle_seconds=1.0, max_seconds=10.0), clock)
    stop = threading.Event()
    batcher.add({"ns/a": 1})
    leading = [False]
    threading.Timer(0.05, lambda: leading.__setitem__(0, True)).start()
    started = time.monotonic()
    assert batcher.wait(stop, poll_seconds=0.01, until=lambda: leading[0]) == ({}, 0.0)
    assert time.monotonic() - started < 0.5 and len(batcher) == 1
    clock.now += 1.0
    assert batcher.wait(stop, poll_seconds=0.01) == ({"ns/a": 1}, 1.0)
