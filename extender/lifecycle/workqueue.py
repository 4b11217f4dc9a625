"""A keyed delay queue: each key is due at one time; workers block until the earliest is due.

Like client-go's delaying + rate-limited workqueue, reduced to what the lifecycle needs: adding a key
that is already queued keeps the earlier due time, a key being processed is never handed to a second
worker (a re-add while processing is parked until `done`), and per-key exponential backoff.
The clock is injected so due-time decisions are testable without sleeping.
"""

from __future__ import annotations

import heapq
import logging
import threading
import time
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

from extender.loops import log_failure

K = TypeVar("K", bound=Hashable)


class DelayQueue(Generic[K]):
    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        base_backoff: float = 0.1,
        max_backoff: float = 10.0,
    ) -> None:
        self._clock = clock
        self._base = base_backoff
        self._max = max_backoff
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, K]] = []
        self._due: dict[K, float] = {}
        self._processing: set[K] = set()
        self._parked: dict[K, float] = {}
        self._failures: dict[K, int] = {}
        self._seq = 0
        self._closed = False

    def add(self, key: K, after: float = 0.0) -> None:
        """Make `key` due `after` seconds from now, unless it is already due sooner."""
        with self._cond:
            due = self._clock() + max(after, 0.0)
            if key in self._processing:
                self._parked[key] = min(due, self._parked.get(key, due))
                return
            if key in self._due and self._due[key] <= due:
                return
            self._push(key, due)
            self._cond.notify()

    def add_all(self, keys: Iterable[K]) -> int:
        """`add` each key now; how many."""
        count = 0
        for key in keys:
            self.add(key)
            count += 1
        return count

    def add_backoff(self, key: K) -> float:
        """Requeue after an exponential backoff (base * 2^failures, capped); returns the delay."""
        with self._cond:
            failures = self._failures.get(key, 0)
            self._failures[key] = failures + 1
        delay = min(self._base * (2**failures), self._max)
        self.add(key, delay)
        return delay

    def forget(self, key: K) -> None:
        """Reset the backoff of `key` after a success."""
        with self._cond:
            self._failures.pop(key, None)

    def pop_due(self) -> K | None:
        """The earliest key whose time has come, marked as processing; None if nothing is due."""
        with self._cond:
            return self._pop_due_locked()

    def get(self, timeout: float | None = None) -> K | None:
        """Block until a key is due (or `timeout` elapses, or the queue is closed)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while not self._closed:
                key = self._pop_due_locked()
                if key is not None:
                    return key
                wait = self._next_wait_locked()
                if deadline is not None:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return None
                    wait = remaining if wait is None else min(wait, remaining)
                self._cond.wait(wait)
            return None

    def done(self, key: K) -> None:
        """Processing of `key` finished; a re-add that arrived meanwhile is queued now."""
        with self._cond:
            self._processing.discard(key)
            if key in self._parked:
                self._push(key, self._parked.pop(key))
                self._cond.notify()

    def due_at(self, key: K) -> float | None:
        with self._cond:
            return self._due.get(key, self._parked.get(key))

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def __len__(self) -> int:
        with self._cond:
            return len(self._due) + len(self._parked)

    def _push(self, key: K, due: float) -> None:
        self._due[key] = due
        self._seq += 1
        heapq.heappush(self._heap, (due, self._seq, key))

    def _pop_due_locked(self) -> K | None:
        now = self._clock()
        while self._heap:
            due, _, key = self._heap[0]
            if self._due.get(key) != due:
                heapq.heappop(self._heap)  # superseded by an earlier add
                continue
            if due > now:
                return None
            heapq.heappop(self._heap)
            del self._due[key]
            self._processing.add(key)
            return key
        return None

    def _next_wait_locked(self) -> float | None:
        while self._heap and self._due.get(self._heap[0][2]) != self._heap[0][0]:
            heapq.heappop(self._heap)
        if not self._heap:
            return None
        # Cap the wait so an injected clock that jumps (tests) is noticed promptly.
        return min(max(self._heap[0][0] - self._clock(), 0.0), 1.0)


def serve(
    queue: DelayQueue[str],
    stop: threading.Event,
    process: Callable[[str], None],
    *,
    is_leader: Callable[[], bool],
    log: logging.Logger,
    doing: str,
) -> None:
    """A worker: pop due keys until `stop`, `process` each while leader (a key popped meanwhile is
    dropped: the next leader enqueues what it must); a failure is logged (`doing <key>`) and retried
    with backoff."""
    while not stop.is_set():
        key = queue.get(timeout=1.0)
        if key is None:
            continue
        try:
            if is_leader():
                process(key)
        except Exception as err:
            log_failure(log, f"{doing} {key}", err)
            queue.add_backoff(key)
        finally:
            queue.done(key)
