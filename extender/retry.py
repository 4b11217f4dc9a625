"""karpy's one retry policy: capped exponential backoff with full jitter.

Every retry in karpy takes its delays from here (watch re-lists, worker loops, API and AWS calls,
parking, pricing and catalog refreshes), so a hiccup in the API server or AWS is met the same way
everywhere and a herd of replicas does not retry in step. `call` wraps tenacity for one call;
`LoopBackoff` paces a long-running loop that must never die (a failed pass waits, a good one resets).
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

import tenacity

T = TypeVar("T")

log = logging.getLogger("karpy.retry")


@dataclass(frozen=True)
class Backoff:
    """Delay before retry n (0-based) is uniform in [0, min(cap, base * 2**n)] ("full jitter")."""

    base: float = 0.5
    cap: float = 30.0

    def ceiling(self, failures: int) -> float:
        return min(self.cap, self.base * (2 ** min(failures, 62)))

    def delay(self, failures: int, rand: Callable[[], float] = random.random) -> float:
        return self.ceiling(failures) * rand()


# Named policies, so a module says what kind of wait it wants rather than choosing constants.
API = Backoff(base=0.2, cap=5.0)  # one API-server or AWS call inside a request or reconcile
LOOP = Backoff(base=1.0, cap=60.0)  # a worker loop or watch that failed a whole pass
REFRESH = Backoff(base=5.0, cap=300.0)  # background refreshes (prices, catalog) that can wait
PARKED = Backoff(base=5.0, cap=60.0)  # pods waiting for the cluster or a Provisioner to change
SETTLE = Backoff(base=1.0, cap=4.0)  # an eventually consistent read catching up (EC2 describe after create)


def call(
    fn: Callable[[], T],
    *,
    retry_on: Callable[[BaseException], bool],
    attempts: int = 4,
    policy: Backoff = API,
    doing: str = "",
    sleep: Callable[[float], None] | None = None,
) -> T:
    """`fn()`, retried while `retry_on(err)` up to `attempts` tries; the last error is raised as is."""

    def wait(state: tenacity.RetryCallState) -> float:
        return policy.delay(state.attempt_number - 1)

    def before_sleep(state: tenacity.RetryCallState) -> None:
        err = state.outcome.exception() if state.outcome else None
        log.debug(
            "Retrying %s after attempt %d, %s",
            doing or getattr(fn, "__name__", "call"),
            state.attempt_number,
            err,
        )

    retrying = tenacity.Retrying(
        sleep=sleep or tenacity.nap.sleep,
        retry=tenacity.retry_if_exception(retry_on),
        stop=tenacity.stop_after_attempt(max(attempts, 1)),
        wait=wait,
        reraise=True,
        before_sleep=before_sleep,
    )
    return retrying(fn)


@dataclass
class LoopBackoff:
    """Pacing for a loop that survives every error: `failed()` returns how long to wait (growing,
    jittered), `succeeded()` resets. `wait(stop)` sleeps that long unless `stop` is set first."""

    policy: Backoff = LOOP
    rand: Callable[[], float] = random.random
    failures: int = field(default=0, init=False)

    def failed(self) -> float:
        delay = self.policy.delay(self.failures, self.rand)
        self.failures += 1
        return delay

    def succeeded(self) -> None:
        self.failures = 0

    @classmethod
    def constant(cls, seconds: float) -> LoopBackoff:
        """No growth and no jitter: a loop that retries at its own period (leader election)."""
        return cls(Backoff(base=seconds, cap=seconds), rand=lambda: 1.0)

    def wait_after_failure(self, stop: threading.Event) -> bool:
        """Sleep the next backoff; True if `stop` was set meanwhile."""
        return stop.wait(self.failed())
