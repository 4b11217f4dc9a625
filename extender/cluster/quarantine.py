"""Objects karpy cannot handle: skipped, reported once per change, counted.

A NodePool, EC2NodeClass, Provisioner or Node whose values karpy cannot load or compute with
(admitted before a webhook refused them, or with the webhook out of the path) must neither stop the
objects beside it nor fill the log: each is reported — an ERROR line and a Warning Event — the
first time it fails and again only when something changes (its generation, or a loaded pool's
spec, never karpy's own status writes; or the error's text), and while it fails it counts in
`karpy_unhandled_objects{kind}`. `recovered` forgets it, so a failure after a fix is reported
afresh.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from prometheus_client import Gauge

UNHANDLED = Gauge(
    "karpy_unhandled_objects",
    "Objects karpy skips because it cannot load or compute with them, by kind.",
    ["kind"],
)

#: An Event message's and a condition's share of an error's text (Karpenter truncates at 300).
MESSAGE_LIMIT = 300


def short(message: str, limit: int = MESSAGE_LIMIT) -> str:
    """`message` cut to `limit` characters (Karpenter's truncateMessage)."""
    return message if len(message) <= limit else message[:limit] + "..."


@dataclass(frozen=True)
class Fault:
    #: What a change of is news: a resourceVersion or generation, or a pool's `spec_only()`.
    version: object
    message: str


class Quarantine:
    """Thread-safe: the lifecycle's workers and the provisioning loop report into one."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._lock = threading.Lock()
        self._faults: dict[str, Fault] = {}
        UNHANDLED.labels(kind=kind).set(0)

    def failed(self, name: str, version: object, message: str) -> bool:
        """Record that `name` (at `version`) failed with `message`; True when that is news, i.e.
        the caller should log at ERROR and record an Event, False when it already did."""
        fault = Fault(version, message)
        with self._lock:
            news = self._faults.get(name) != fault
            self._faults[name] = fault
            UNHANDLED.labels(kind=self.kind).set(len(self._faults))
        return news

    def recovered(self, name: str) -> bool:
        """`name` is handled again (or gone); True if it was quarantined."""
        with self._lock:
            known = self._faults.pop(name, None) is not None
            UNHANDLED.labels(kind=self.kind).set(len(self._faults))
        return known

    def names(self) -> set[str]:
        with self._lock:
            return set(self._faults)

    def retain(self, names: set[str]) -> None:
        """Forget every object not among `names` (deleted since)."""
        with self._lock:
            for name in set(self._faults) - names:
                del self._faults[name]
            UNHANDLED.labels(kind=self.kind).set(len(self._faults))
