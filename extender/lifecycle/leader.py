"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's semantics.

A follower takes the Lease only when its record has not changed for `lease_duration` by the
follower's own monotonic clock (observed time, not the holder's timestamps, so clock skew between
replicas does not matter). The leader renews every `retry_period`; `is_leader()` turns False as soon
as a renewal has not succeeded for `renew_deadline` (< lease_duration) or another holder is seen —
so a replica that loses the Lease stops launching before anyone else can acquire it.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from extender.cluster import leases
from extender.lifecycle import metrics
from extender.loops import run_forever
from extender.retry import LoopBackoff
from extender.settings import LeaderElectionSettings

log = logging.getLogger("karpy.leader")


def _micro_time(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def default_identity() -> str:
    return f"{socket.gethostname()}_{os.getpid()}_{uuid.uuid4().hex[:8]}"


def may_acquire(
    spec: Mapping[str, Any] | None, identity: str, observed_at: float, now: float, lease_duration: float
) -> bool:
    """Pure: may `identity` write itself into a Lease whose record it last saw change at `observed_at`?"""
    if not spec:
        return True
    holder = spec.get("holderIdentity") or ""
    if holder in ("", identity):
        return True
    duration = float(spec.get("leaseDurationSeconds") or lease_duration)
    return now >= observed_at + duration


class LeaderElector:
    def __init__(
        self,
        *,
        kube: Any,
        settings: LeaderElectionSettings,
        identity: str | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        on_started: Callable[[], None] | None = None,
        on_stopped: Callable[[], None] | None = None,
    ) -> None:
        self.kube = kube
        self.settings = settings
        self.identity = identity or default_identity()
        self._mono = monotonic
        self._on_started = on_started
        self._on_stopped = on_stopped
        self._lock = threading.Lock()
        self._renewed_at: float | None = None  # monotonic time of our last successful write
        self._observed_record: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self._leading = False

    def is_leader(self) -> bool:
        if not self.settings.enabled:
            return True
        with self._lock:
            return (
                self._leading
                and self._renewed_at is not None
                and self._mono() - self._renewed_at < self.settings.renew_deadline_seconds
            )

    def try_acquire_or_renew(self) -> bool:
        """One round: read the Lease, write ourselves into it if allowed; True if we hold it now."""
        s = self.settings
        lease = leases.get(self.kube, s.namespace, s.lease_name)
        spec = (lease or {}).get("spec") or {}
        now = self._mono()
        record = (spec.get("holderIdentity"), spec.get("renewTime"), spec.get("leaseTransitions"))
        if record != self._observed_record:
            self._observed_record, self._observed_at = record, now
        if not may_acquire(
            spec if lease else None, self.identity, self._observed_at, now, s.lease_duration_seconds
        ):
            self._set_leading(False)
            return False
        wall = datetime.now(UTC)
        holder = spec.get("holderIdentity") or ""
        new_spec = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(s.lease_duration_seconds),
            "renewTime": _micro_time(wall),
            "acquireTime": spec.get("acquireTime") if holder == self.identity else _micro_time(wall),
            "leaseTransitions": int(spec.get("leaseTransitions") or 0)
            + (0 if holder == self.identity else 1),
        }
        if lease is None:
            new_spec["leaseTransitions"] = 0
            written = leases.create(self.kube, s.namespace, s.lease_name, new_spec)
        else:
            written = leases.update(self.kube, lease, new_spec)
        if written is None:
            self._set_leading(False)
            return False
        with self._lock:
            self._renewed_at = now
        written_spec = written.get("spec") or {}
        self._observed_record = (
            written_spec.get("holderIdentity"),
            written_spec.get("renewTime"),
            written_spec.get("leaseTransitions"),
        )
        self._observed_at = now
        self._set_leading(True)
        return True

    def release(self) -> None:
        """Give the Lease up on graceful shutdown so a follower need not wait out the duration."""
        s = self.settings
        with self._lock:
            was_leading = self._leading
        self._set_leading(False)
        if not was_leading:
            return
        try:
            lease = leases.get(self.kube, s.namespace, s.lease_name)
            if lease and (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                spec = dict(lease["spec"])
                spec.update(
                    holderIdentity="", leaseDurationSeconds=1, renewTime=_micro_time(datetime.now(UTC))
                )
                leases.update(self.kube, lease, spec)
                log.info("Released leader lease %s/%s", s.namespace, s.lease_name)
        except Exception as err:  # shutdown must go on; the lease then simply expires
            log.warning(
                "Failed to release leader lease %s/%s, it expires instead, %s", s.namespace, s.lease_name, err
            )

    def run(self, stop: threading.Event) -> None:
        """Acquire/renew every retry_period until `stop`; release on the way out."""
        if not self.settings.enabled:
            self._set_leading(True)
            stop.wait()
            return
        period = self.settings.retry_period_seconds

        def one_round() -> float:
            try:
                self.try_acquire_or_renew()
            finally:
                self._lapse()
            return period

        # A failed round (API unreachable: is_leader() lapses after renew_deadline) is retried at
        # the same period, as client-go does: a growing backoff would delay a failover.
        run_forever(
            one_round,
            stop,
            doing=f"acquiring or renewing leader lease {self.settings.namespace}/{self.settings.lease_name}",
            backoff=LoopBackoff.constant(period),
            logger=log,
        )
        self.release()

    def start(self, stop: threading.Event) -> threading.Thread:
        thread = threading.Thread(target=self.run, args=(stop,), name="leader-election", daemon=True)
        thread.start()
        return thread

    def _lapse(self) -> None:
        """Give leadership up once the Lease has not been renewed within renew_deadline (e.g. the
        API server is unreachable): is_leader() already says so, and the gauge and log must too."""
        with self._lock:
            renewed = self._renewed_at
            lapsed = self._leading and (
                renewed is None or self._mono() - renewed >= self.settings.renew_deadline_seconds
            )
        if lapsed:
            self._set_leading(False, why=f", not renewed within {self.settings.renew_deadline_seconds:g}s")

    def _set_leading(self, leading: bool, why: str = "") -> None:
        with self._lock:
            changed = leading != self._leading
            self._leading = leading
            if not leading:
                self._renewed_at = None
        metrics.IS_LEADER.set(1 if leading else 0)
        if not changed:
            return
        s = self.settings
        if leading:
            log.info("Acquired leader lease %s/%s as %s", s.namespace, s.lease_name, self.identity)
            if self._on_started:
                self._on_started()
        else:
            log.warning("Lost leader lease %s/%s%s", s.namespace, s.lease_name, why)
            if self._on_stopped:
                self._on_stopped()
