"""The API server's Kubernetes version (major.minor), which picks the EKS-optimized AMI of every launch.

It changes only when the control plane is upgraded, so it is read once and then refreshed every
REFRESH_SECONDS: a failed read is retried (extender.retry's API policy), a failed refresh keeps
the value already known. Asking the API server on every launch let one 503 on GET /version abort
a whole launch group (seen in the chaos run, issue 13).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable

from kubernetes import client

from extender import retry
from extender.cluster.client import call_json
from extender.cluster.errors import ClusterError, is_transient, translated

log = logging.getLogger("karpy.controller")

REFRESH_SECONDS = 600.0


def read(kube: client.ApiClient) -> str:
    """GET /version as "major.minor" ("1.37"; a provider's "37+" minor loses its suffix)."""
    with translated("reading the API server version"):
        info = call_json(client.VersionApi(kube).get_code)
    return f"{info['major']}.{re.sub(r'[^0-9]', '', str(info['minor']))}"


class ServerVersion:
    """A callable giving the version, cached; thread-safe (launch groups run in parallel)."""

    def __init__(
        self,
        read: Callable[[], str],
        *,
        refresh_seconds: float = REFRESH_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        self._read = read
        self._refresh = refresh_seconds
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._value: str | None = None
        self._read_at = 0.0

    def __call__(self) -> str:
        with self._lock:
            if self._value is not None and self._clock() - self._read_at < self._refresh:
                return self._value
            try:
                value = retry.call(
                    self._read,
                    retry_on=is_transient,
                    doing="reading the API server version",
                    sleep=self._sleep,
                )
            except ClusterError as err:
                if self._value is None:
                    raise
                log.warning("Failed refreshing the API server version, keeping %s, %s", self._value, err)
                self._read_at = self._clock()
                return self._value
            self._value, self._read_at = value, self._clock()
            return value
