"""A token bucket for instance creation: Karpenter's 2 launches/s with a burst of 100.

Called by AWSCloudProvider.create before every CreateFleet; the clock and sleep are injectable so
tests drive it without waiting.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class TokenBucket:
    def __init__(
        self,
        *,
        rate: float = 2.0,
        burst: int = 100,
        timer: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("rate must be > 0 and burst >= 1")
        self._rate = rate
        self._burst = float(burst)
        self._timer = timer
        self._sleep = sleep
        self._tokens = float(burst)
        self._stamp = timer()
        self._lock = threading.Lock()

    def _refill(self) -> None:
        now = self._timer()
        self._tokens = min(self._burst, self._tokens + (now - self._stamp) * self._rate)
        self._stamp = now

    def acquire(self) -> float:
        """Take one token, sleeping until one is available; returns the seconds waited."""
        with self._lock:
            self._refill()
            self._tokens -= 1.0
            # A negative balance is a reservation: this caller waits out its own debt, outside the lock.
            wait = 0.0 if self._tokens >= 0 else -self._tokens / self._rate
        if wait:
            self._sleep(wait)
        return wait
