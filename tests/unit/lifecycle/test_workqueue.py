"""DelayQueue: due-time ordering, dedupe to the earliest due, no double hand-out, backoff."""

from __future__ import annotations

import threading
import time

from extender.lifecycle.workqueue import DelayQueue


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_key_is_handed_out_exactly_at_its_due_time() -> None:
    clock = FakeClock()
    q: DelayQueue[str] = DelayQueue(clock=clock)
    q.add("a", 30.0)
    clock.now += 29.999
    assert q.pop_due() is None
    clock.now += 0.001
    assert q.pop_due() == "a"


def test_earlier_add_wins_and_later_add_is_ignored() -> None:
    clock = FakeClock()
    q: DelayQueue[str] = DelayQueue(clock=clock)
    q.add("a", 30.0)
    q.add("a", 5.0)
    q.add("a", 60.0)
    assert len(q) == 1
    clock.now += 5.0
    assert q.pop_due() == "a"
    q.done("a")
    clock.now += 100.0
    assert q.pop_due() is None  # the superseded 30 s and 60 s entries are gone


def test_keys_come_out_in_due_order() -> None:
    clock = FakeClock()
    q: DelayQueue[str] = DelayQueue(clock=clock)
    for key, after in (("c", 3.0), ("a", 1.0), ("b", 2.0)):
        q.add(key, after)
    clock.now += 10
    assert [q.pop_due(), q.pop_due(), q.pop_due()] == ["a", "b", "c"]


def test_key_in_processing_is_parked_until_done() -> None:
    clock = FakeClock()
    q: DelayQueue[str] = DelayQueue(clock=clock)
    q.add("a")
    assert q.pop_due() == "a"
    q.add("a")
    assert q.pop_due() is None  # never given to a second worker while the first holds it
    q.done("a")
    assert q.pop_due() == "a"


def test_backoff_doubles_and_caps_and_forget_resets() -> None:
    q: DelayQueue[str] = DelayQueue(clock=FakeClock(), base_backoff=0.1, max_backoff=1.0)
    delays = [q.add_backoff("a") for _ in range(6)]
    assert delays == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    q.forget("a")
    assert q.add_backoff("a") == 0.1


def test_get_blocks_until_due_on_the_real_clock() -> None:
    q: DelayQueue[str] = DelayQueue()
    q.add("a", 0.2)
    start = time.monotonic()
    assert q.get(timeout=2.0) == "a"
    assert 0.15 <= time.monotonic() - start < 1.0


def test_get_wakes_for_an_add_from_another_thread_and_close_releases() -> None:
    q: DelayQueue[str] = DelayQueue()
    threading.Timer(0.1, lambda: q.add("x")).start()
    assert q.get(timeout=2.0) == "x"
    threading.Timer(0.1, q.close).start()
    start = time.monotonic()
    assert q.get(timeout=5.0) is None
    assert time.monotonic() - start < 2.0
