"""Expiry (`ttlSecondsUntilExpired`): replace a node once it is older than its TTL, a few at a time.

A due node takes one of `max_disrupting` slots (cluster-wide, expiry and drift) and one of its
Provisioner's disruption budget (budgets.py, shared with emptiness and consolidation), is cordoned
and marked for removal, capacity for its pods is requested from provisioning, and only when those
replacement nodes are initialized (Ready, taints lifted; or the wait cap passes) is the node
deleted — the termination finalizer then drains it. Longest overdue first. `Expiry.replace` is
that path for any reason: drift (drift.py) replaces a drifted node through it too.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from extender.api.node import Node
from extender.api.pod import Pod
from extender.cluster.cordon import cordon
from extender.cluster.errors import ClusterError
from extender.lifecycle import horizon, metrics, nodepatch, readiness
from extender.lifecycle.context import Context, go_duration

#: How often a due node waiting for a slot, or for its replacements, is looked at again.
WAIT_POLL_SECONDS = 2.0
#: Replacement reason -> the `reason` label of karpenter_nodes_terminated.
TERMINATION_REASONS = {"expired": "expiration", "drifted": "drift"}


def expires_at(node: Node, ttl: float | None) -> datetime | None:
    """When the node expires; None for never (no TTL, or one past the calendar: horizon.py)."""
    if ttl is None or node.created is None:
        return None
    return horizon.after(node.created, ttl)


def pick(
    candidates: Sequence[tuple[str, datetime]], now: datetime, in_flight: int, max_disrupting: int
) -> list[str]:
    """Pure: which due nodes may start now — the longest-overdue first, at most the free slots."""
    free = max(max_disrupting - in_flight, 0)
    due = sorted((at, name) for name, at in candidates if at <= now)
    return [name for _, name in due[:free]]


@dataclass
class Disruption:
    started: datetime
    replacements: list[str] = field(default_factory=list)


class Expiry:
    """Tracks the nodes this replica is currently replacing (the disruption slots)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active: dict[str, Disruption] = {}
        #: Due nodes that may not be disrupted now (not initialized, do-not-disrupt): left out of
        #: `pick`, so one that stays so (a startup taint never lifted) does not hold the slots.
        self._held: set[str] = set()

    def active(self) -> set[str]:
        with self._lock:
            return set(self._active)

    def finished(self, node: str) -> None:
        with self._lock:
            self._active.pop(node, None)
            self._held.discard(node)

    def hold(self, node: str, held: bool) -> None:
        with self._lock:
            if held:
                self._held.add(node)
            else:
                self._held.discard(node)

    def reconcile(
        self,
        ctx: Context,
        node: Node,
        ttl: float | None,
        *,
        pods: Sequence[Pod],
        deleting: set[str],
        due: Sequence[tuple[str, datetime]],
        admit: Callable[[], bool] | None = None,
    ) -> float | None:
        """`deleting` = karpy nodes already being terminated; `due` = (name, due time) of every node
        due for replacement (expired or drifted); `admit` takes a slot of the Provisioner's
        disruption budget (False = wait for one)."""
        at = expires_at(node, ttl)
        if at is None or node.deleting:
            return None
        now = ctx.clock()
        if now < at:
            return (at - now).total_seconds()
        overdue = go_duration((now - at).total_seconds())
        return self.replace(
            ctx,
            node,
            "expired",
            at,
            pods=pods,
            deleting=deleting,
            due=due,
            admit=admit,
            why=f"after {go_duration(ttl or 0)} (+{overdue})",
        )

    def replace(
        self,
        ctx: Context,
        node: Node,
        reason: str,
        at: datetime,
        *,
        pods: Sequence[Pod],
        deleting: set[str],
        due: Sequence[tuple[str, datetime]],
        admit: Callable[[], bool] | None = None,
        why: str = "",
    ) -> float | None:
        """Replace `node` (due since `at`) for `reason` ("expired", "drifted"): wait for a slot and
        the budget, launch replacements for its pods, delete it once they are initialized. Returns when
        to look again, None once the node is deleted."""
        node_name = node.name
        now = ctx.clock()
        with self._lock:
            disruption = self._active.get(node_name)
            if disruption is None:
                in_flight = len(deleting | set(self._active))
                waiting = [(name, at) for name, at in due if name not in self._held]
                if node_name not in pick(waiting, now, in_flight, ctx.settings.lifecycle.max_disrupting):
                    metrics.disruption(reason, "blocked")
                    ctx.log.debug(
                        "%s node %s waits for a disruption slot (%s in flight)",
                        reason.capitalize(),
                        node_name,
                        sorted(deleting | set(self._active)),
                    )
                    return WAIT_POLL_SECONDS
                if admit is not None and not admit():
                    metrics.disruption(reason, "blocked")
                    ctx.log.debug(
                        "%s node %s waits for its Provisioner's disruption budget",
                        reason.capitalize(),
                        node_name,
                    )
                    return WAIT_POLL_SECONDS
                disruption = self._active[node_name] = Disruption(started=now)
                start = True
            else:
                start = False
        if start:
            self._start(ctx, node_name, pods, disruption, reason)
        if not self._replacements_ready(ctx, disruption, now):
            return WAIT_POLL_SECONDS
        ctx.log.info("Triggering termination for %s node %s %s", reason, node_name, why)
        metrics.NODES_TERMINATED.labels(reason=TERMINATION_REASONS.get(reason, reason)).inc()
        with metrics.disrupting(reason):
            nodepatch.delete_node(ctx.kube, node_name)
        return None

    def _start(
        self, ctx: Context, node_name: str, pods: Sequence[Pod], disruption: Disruption, reason: str
    ) -> None:
        ctx.mark(node_name, reason)
        if cordon(ctx.kube, node_name):
            ctx.log.info("Cordoned node %s", node_name)
        # Marked and cordoned, the node takes no new pods; the ones bound since the caller listed
        # them (a batch binding to a node it just launched) need room too, or they are evicted
        # with no replacement up (issue 31: a pod bound 10 ms after the listing lost its node).
        try:
            pods = nodepatch.pods_on_node(ctx.kube, node_name)
        except ClusterError as err:
            ctx.log.warning("Listing pods of %s node %s again, %s", reason, node_name, err)
        workload = nodepatch.workload(pods)
        if workload and ctx.provisioning is not None:
            disruption.replacements = list(ctx.provisioning.provision_replacements(workload))
            ctx.log.info(
                "Launched %d replacement node(s) %s for %s node %s",
                len(disruption.replacements),
                disruption.replacements,
                reason,
                node_name,
            )

    def _replacements_ready(self, ctx: Context, disruption: Disruption, now: datetime) -> bool:
        waited = (now - disruption.started).total_seconds()
        if waited >= ctx.settings.lifecycle.replacement_wait_seconds:
            return True
        for name in disruption.replacements:
            node = nodepatch.get_node(ctx.kube, name)
            # Not created yet counts as not ready: the launch is still in flight. Initialized, as
            # Karpenter waits for replacements (Ready and the not-ready/startup taints gone), not
            # only Ready: until the taint is lifted the moved pods cannot land there.
            if node is None or not readiness.initialized(node):
                return False
        return True
