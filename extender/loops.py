"""`run_forever`: the one way a karpy worker loop survives any exception.

Each pass runs inside a try; a failed pass is logged as one line naming what the loop was doing
and is retried after `extender.retry.LoopBackoff` (capped exponential backoff with jitter). Errors
that are the world's fault (API server, AWS, network) are WARNINGs; anything else is a bug a person
must look at, so its first occurrence in a streak is an ERROR with the traceback. Every pass,
failed or not, ticks the worker's heartbeat (extender.heartbeat), so `/healthz` sees a hung loop.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from extender.heartbeat import no_tick
from extender.retry import LoopBackoff

log = logging.getLogger("karpy.loops")

#: A pass returns how long to wait before the next one (None: go again at once).
Pass = Callable[[], float | None]


def is_expected(err: BaseException) -> bool:
    """Failures of the outside world (API server, AWS, network) rather than of karpy's code."""
    from botocore.exceptions import BotoCoreError, ClientError
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    from extender.cloud.types import CloudError
    from extender.cluster.errors import ClusterError

    expected = (ClusterError, ApiException, CloudError, BotoCoreError, ClientError, HTTPError, OSError)
    return isinstance(err, expected)


def log_failure(logger: logging.Logger, what: str, err: BaseException) -> None:
    """One failed step of a loop that retries it: a WARNING line for the world's failures, an
    ERROR with the traceback for karpy's own."""
    if is_expected(err):
        logger.warning("Failed %s, retrying, %s", what, err)
    else:
        logger.error("Failed %s, retrying", what, exc_info=err)


def run_forever(
    one_pass: Pass,
    stop: threading.Event,
    *,
    doing: str | Callable[[], str],
    tick: Callable[[], None] = no_tick,
    backoff: LoopBackoff | None = None,
    logger: logging.Logger = log,
    start_after: float = 0.0,
) -> None:
    """Call `one_pass` until `stop` is set; never raises. `doing` names the work in log lines (a
    callable when the step changes within a pass, e.g. "listing karpy nodes"); the first pass runs
    `start_after` seconds from now (a periodic pass that needs the watches warm first)."""
    backoff = backoff or LoopBackoff()
    streak = False
    if start_after and stop.wait(start_after):
        return
    while not stop.is_set():
        try:
            wait = one_pass()
        except Exception as err:
            delay = backoff.failed()
            what = doing() if callable(doing) else doing
            if is_expected(err) or streak:
                logger.warning("Failed %s, retrying in %.1fs, %s", what, delay, err)
            else:
                logger.error("Failed %s, retrying in %.1fs", what, delay, exc_info=True)
            streak = True
            tick()
            stop.wait(delay)
            continue
        if streak:
            logger.info("Recovered %s", doing() if callable(doing) else doing)
        streak = False
        backoff.succeeded()
        tick()
        if wait:
            stop.wait(wait)
