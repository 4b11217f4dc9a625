"""Worker heartbeats: each long-running loop ticks after every pass, `/healthz` reads who is late.

A worker thread that died or hangs (a call without a timeout, a deadlock) stops ticking; once it
has not completed a pass within its deadline the replica reports unhealthy and the kubelet restarts
it. A pass that failed still counts as completed: a loop backing off from an unreachable API server
is alive, and restarting the replica would not bring the API server back.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Late:
    worker: str
    seconds_since: float
    deadline: float

    def __str__(self) -> str:
        return (
            f"{self.worker}: no completed pass for {self.seconds_since:.0f}s (deadline {self.deadline:.0f}s)"
        )


class Heartbeats:
    """Thread-safe registry of worker name -> (deadline, last tick)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._workers: dict[str, tuple[float, float]] = {}

    def register(self, worker: str, deadline: float) -> Callable[[], None]:
        """Start watching `worker` (counted from now); returns its `tick` function."""
        with self._lock:
            self._workers[worker] = (deadline, self._clock())
        return lambda: self.tick(worker)

    def tick(self, worker: str) -> None:
        with self._lock:
            deadline, _ = self._workers.get(worker, (0.0, 0.0))
            if deadline:
                self._workers[worker] = (deadline, self._clock())

    def unregister(self, worker: str) -> None:
        with self._lock:
            self._workers.pop(worker, None)

    def late(self) -> list[Late]:
        now = self._clock()
        with self._lock:
            items = list(self._workers.items())
        return [
            Late(worker, now - last, deadline)
            for worker, (deadline, last) in sorted(items)
            if now - last > deadline
        ]


def no_tick() -> None:
    """The tick of a loop nobody watches (unit tests, tools)."""
