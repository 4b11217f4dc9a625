"""The batching window: opens on the first pod, closes after `idle` without a new pod, `max` in
all, or `max_pods` pods (Karpenter 0.5: 1 s / 10 s / 2,000).

`Window` is the pure rule with an injected clock; `Batcher` adds the blocking wait around it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from extender.settings import BatchingSettings


class Window:
    def __init__(self, settings: BatchingSettings, clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self.clock = clock
        self.items: dict[str, Any] = {}
        self.opened: float | None = None
        self.last_new: float | None = None

    def add(self, items: Mapping[str, Any]) -> list[str]:
        """Add or refresh pods; only a pod not yet in the window resets the idle timer, so a pod
        whose status keeps changing cannot hold the window open. Returns the keys that were new."""
        now = self.clock()
        new = [key for key in items if key not in self.items]
        self.items.update(items)
        if new:
            if self.opened is None:
                self.opened = now
            self.last_new = now
        return new

    def deadline(self) -> float | None:
        """When the window closes (clock time), or None while it is empty."""
        if self.opened is None or self.last_new is None:
            return None
        return min(self.last_new + self.settings.idle_seconds, self.opened + self.settings.max_seconds)

    def due(self) -> bool:
        if not self.items:
            return False
        if len(self.items) >= self.settings.max_pods:
            return True
        deadline = self.deadline()
        return deadline is not None and self.clock() >= deadline

    def take(self) -> tuple[dict[str, Any], float]:
        """The batch (at most max_pods, oldest first) and how long the window was open; the rest
        opens the next window."""
        now = self.clock()
        waited = now - self.opened if self.opened is not None else 0.0
        keys = list(self.items)
        batch = {key: self.items[key] for key in keys[: self.settings.max_pods]}
        rest = {key: self.items[key] for key in keys[self.settings.max_pods :]}
        self.items, self.opened, self.last_new = {}, None, None
        if rest:
            self.add(rest)
        return batch, waited


class Batcher:
    """Thread-safe Window; `wait` blocks the provisioning loop until a batch is due."""

    def __init__(self, settings: BatchingSettings, clock: Callable[[], float] = time.monotonic) -> None:
        self._window = Window(settings, clock)
        self._cond = threading.Condition()

    def add(self, items: Mapping[str, Any]) -> list[str]:
        """Add to the window; the keys that were not in it yet."""
        if not items:
            return []
        with self._cond:
            new = self._window.add(items)
            self._cond.notify_all()
        return new

    def __len__(self) -> int:
        return len(self._window.items)

    def wait(
        self,
        stop: threading.Event,
        poll_seconds: float = 0.5,
        idle_return: float | None = None,
        until: Callable[[], bool] | None = None,
    ) -> tuple[dict[str, Any], float]:
        """The next batch and its window duration; ({}, 0) when `stop` is set first, after
        `idle_return` seconds with an empty window (so the caller can do periodic work), or as soon
        as `until()` is true (looked at every `poll_seconds`; the window keeps its pods and times)."""
        give_up = None if idle_return is None else time.monotonic() + idle_return
        with self._cond:
            while not stop.is_set():
                if give_up is not None and not self._window.items and time.monotonic() >= give_up:
                    break
                if until is not None and until():
                    break
                if self._window.due():
                    return self._window.take()
                deadline = self._window.deadline()
                timeout = (
                    poll_seconds if deadline is None else min(poll_seconds, deadline - self._window.clock())
                )
                self._cond.wait(max(timeout, 0.001))
        return {}, 0.0

    def wake(self) -> None:
        with self._cond:
            self._cond.notify_all()
