"""Termination finalizer `karpenter.sh/termination`: cordon, drain, terminate the instance, release.

Runs for karpy nodes that have a deletionTimestamp. Drain evicts through the Eviction API so the
API server enforces PodDisruptionBudgets: non-critical pods first, system-cluster-critical and
system-node-critical only once the others are gone (the order Karpenter 0.5 meant, not the one its
code had). DaemonSet and static pods are left to die with the node; a `do-not-evict` or
`do-not-disrupt` pod blocks the drain. The instance is terminated only after the drain, then the
node's NodeClaim (NodePool nodes) is deleted, and the finalizer removed only after that.

With a `terminationGracePeriod` (v1) a blocked drain ends: the node's deadline is its deletion time
plus that period, and a pod still there is deleted (no PDB, no annotation consulted) once
`deadline - its own terminationGracePeriodSeconds` has passed, with the grace left until the
deadline (at least 1 s), so it is gone by then; a pod already terminating past the deadline is
deleted again with that shorter grace. Karpenter v1: node/termination/terminator `Drain`,
eviction.go `needsForceDelete`/`forceDelete`. Without one (None), a blocked drain waits for ever.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import Enum

from extender.api import labels
from extender.api.meta import format_time, parse_time_or_none
from extender.api.node import Node
from extender.api.pod import Pod
from extender.cloud.types import InstanceNotFoundError
from extender.cluster import nodeclaims
from extender.cluster.cordon import cordon
from extender.cluster.eviction import Outcome, delete, evict
from extender.cluster.nodes import instance_id
from extender.lifecycle import horizon, metrics, nodepatch, protection
from extender.lifecycle.context import Context


class Step(Enum):
    DONE = "done"  # finalizer removed (or not ours)
    WAIT = "wait"  # pods are terminating: look again shortly
    BACKOFF = "backoff"  # blocked (PDB, do-not-evict, API error): retry with backoff


@dataclass(frozen=True)
class DrainPlan:
    """Pure classification of a node's pods for one drain round."""

    blocking: tuple[Pod, ...]  # do-not-evict / do-not-disrupt
    evict_now: tuple[Pod, ...]  # this round's tier, not yet terminating
    waiting: int  # pods still to go (terminating, or in the later tier)
    #: Past the node's termination deadline less their own grace: deleted, whatever blocks them.
    force: tuple[Pod, ...] = ()
    #: When the next pod left will be due for deletion (None: no deadline, or none left).
    next_force: datetime | None = None

    @property
    def drained(self) -> bool:
        return not self.blocking and not self.evict_now and not self.force and self.waiting == 0


#: Kubernetes' default terminationGracePeriodSeconds, for a pod read without one.
DEFAULT_POD_GRACE_SECONDS = 30


def needs_force_delete(pod: Pod, deadline: datetime | None, now: datetime) -> bool:
    """Karpenter's needsForceDelete: the pod must be deleted now to be gone by `deadline`. A pod
    already terminating is deleted again only if that can end it sooner (a grace is at least 1 s)."""
    if deadline is None:
        return False
    if pod.deleted_at is not None:
        return pod.deleted_at > deadline and pod.deleted_at > now + timedelta(seconds=1)
    return now > _force_at(pod, deadline)


def _force_at(pod: Pod, deadline: datetime) -> datetime:
    grace = pod.grace_seconds if pod.grace_seconds is not None else DEFAULT_POD_GRACE_SECONDS
    # A grace longer than the calendar before the deadline: due since the beginning of time.
    return horizon.after(deadline, -grace) or datetime.min.replace(tzinfo=UTC)


def plan_drain(
    pods: Sequence[Pod], now: datetime, stuck_after: float, deadline: datetime | None = None
) -> DrainPlan:
    relevant = [
        p
        for p in pods
        if not p.is_terminal
        and not p.node_bound
        and not p.tolerates_unschedulable
        and not _stuck(p, now, stuck_after)
    ]
    # At the deadline, every tier at once: a blocked non-critical pod must not hold a critical one.
    force = tuple(p for p in relevant if needs_force_delete(p, deadline, now))
    graceful = [p for p in relevant if p not in force]
    blocking = tuple(p for p in graceful if protection.protected(p) and not p.deleting)
    non_critical = [p for p in graceful if not p.is_critical]
    tier = non_critical or [p for p in graceful if p.is_critical]
    evict_now = tuple(p for p in tier if not p.deleting and not protection.protected(p))
    return DrainPlan(
        blocking=blocking,
        evict_now=evict_now,
        waiting=len(graceful) - len(evict_now) - len(blocking),
        force=force,
        next_force=min((_force_at(p, deadline) for p in graceful if not p.deleting), default=None)
        if deadline is not None
        else None,
    )


def deadline_of(node: Node, grace_seconds: float | None) -> datetime | None:
    """When the node's drain must end: its deletion time plus the terminationGracePeriod (None: no
    deadline, as without a period; a period past the calendar has none either, horizon.py), or the
    earlier time node repair stamped on it (`karpy.sh/termination-timestamp`, repair.py)."""
    stamped = parse_time_or_none(node.annotations.get(labels.TERMINATION_TIMESTAMP_ANNOTATION))
    graceful = None
    if grace_seconds is not None and node.deleted_at is not None:
        graceful = horizon.after(node.deleted_at, grace_seconds)
    return min((d for d in (stamped, graceful) if d is not None), default=None)


def _stuck(pod: Pod, now: datetime, stuck_after: float) -> bool:
    """A pod past its deletionTimestamp (+ slack) whose kubelet is gone would hold the drain forever."""
    return pod.deleted_at is not None and now > pod.deleted_at + timedelta(seconds=stuck_after)


class Terminator:
    def __init__(self) -> None:
        self._cordoned: set[str] = set()
        self._wake: dict[str, datetime] = {}

    def wake_at(self, node: str) -> datetime | None:
        """When a blocked drain of `node` must be looked at again, whatever its backoff says: the
        next pod's deletion time under the node's terminationGracePeriod."""
        return self._wake.get(node)

    def reconcile(self, ctx: Context, node: Node, grace_seconds: float | None = None) -> Step:
        """`grace_seconds`: the node's terminationGracePeriod (None: a blocked drain waits)."""
        node_name = node.name
        if labels.TERMINATION_FINALIZER not in node.finalizers:
            return Step.DONE
        ctx.mark(node_name, "terminating")
        if node_name not in self._cordoned and not node.unschedulable and cordon(ctx.kube, node_name):
            ctx.log.info("Cordoned node %s", node_name)
        self._cordoned.add(node_name)
        pods = nodepatch.pods_on_node(ctx.kube, node_name)
        step = self._drain(ctx, node, pods, deadline_of(node, grace_seconds))
        if step is not Step.DONE:
            return step
        self._terminate_instance(ctx, node)
        nodeclaims.delete_for_node(ctx.kube, node)
        nodepatch.remove_finalizer(ctx.kube, node, labels.TERMINATION_FINALIZER)
        ctx.log.info("Deleted node %s", node_name)
        self._cordoned.discard(node_name)
        self._wake.pop(node_name, None)
        ctx.unmark(node_name)
        # Otherwise a Provisioner's status.resources keeps counting the node until the next launch;
        # a NodePool's status is v1's, rewritten by the v1 status pass (cluster/v1status.py).
        provisioner = node.labels.get(labels.PROVISIONER_NAME)
        if provisioner and ctx.provisioning is not None:
            ctx.provisioning.refresh_status([provisioner])
        if node.deleted_at is not None:
            metrics.TERMINATION_DURATION.observe(max((ctx.clock() - node.deleted_at).total_seconds(), 0.0))
        return Step.DONE

    def _drain(self, ctx: Context, node: Node, pods: Sequence[Pod], deadline: datetime | None) -> Step:
        node_name = node.name
        now = ctx.clock()
        plan = plan_drain(pods, now, ctx.settings.lifecycle.stuck_pod_seconds, deadline)
        if plan.next_force is None:
            self._wake.pop(node_name, None)
        else:
            self._wake[node_name] = plan.next_force
        if plan.drained:
            return Step.DONE
        if deadline is not None and plan.force:
            self._force_delete(ctx, node, plan.force, deadline, now)
        for pod in plan.blocking:
            message = f"Unable to drain node {node_name}, {protection.pod_blocker(pod)}"
            ctx.log.info(message)
            ctx.recorder.node(node, "FailedDraining", message, warning=True)
            ctx.recorder.pod(pod, "FailedDraining", message, warning=True)
        if plan.blocking:
            return Step.BACKOFF
        blocked = False
        for pod in plan.evict_now:
            outcome, message = evict(ctx.kube, pod.namespace, pod.name, pod.uid)
            metrics.EVICTIONS.labels(outcome=outcome.value).inc()
            if outcome is Outcome.PDB_VIOLATION:
                ctx.log.info("Failed to evict pod %s due to PDB violation.", pod.key)
                blocked = True
            elif outcome is Outcome.PDB_MISCONFIGURED:
                ctx.log.info("Failed to evict pod %s due to PDB misconfiguration error.", pod.key)
                blocked = True
            elif outcome is Outcome.ERROR:
                ctx.log.warning("Failed to evict pod %s: %s", pod.key, message)
                blocked = True
            else:
                ctx.log.debug("Evicted pod %s", pod.key)
        return Step.BACKOFF if blocked else Step.WAIT

    def _force_delete(
        self, ctx: Context, node: Node, pods: Sequence[Pod], deadline: datetime, now: datetime
    ) -> None:
        grace = max(int((deadline - now).total_seconds()), 1)
        for pod in pods:
            outcome, error = delete(ctx.kube, pod.namespace, pod.name, pod.uid, grace)
            if outcome is Outcome.ERROR:
                ctx.log.warning(
                    "Failed to delete pod %s by node %s's deadline: %s", pod.key, node.name, error
                )
                continue
            message = (
                f"Deleted pod {pod.key} to meet the termination deadline {format_time(deadline)} of node "
                f"{node.name} (grace {grace}s of its {pod.grace_seconds}s), bypassing its PDB and "
                "do-not-disrupt"
            )
            ctx.log.info(message)
            ctx.recorder.pod(pod, "Disrupted", message, warning=True)

    def _terminate_instance(self, ctx: Context, node: Node) -> None:
        instance = instance_id(node.provider_id)
        if instance is None:
            return
        with contextlib.suppress(InstanceNotFoundError):  # already gone: that is what we wanted
            ctx.cloud.delete(instance)
        ctx.log.info("Terminated instance %s of node %s", instance, node.name)
