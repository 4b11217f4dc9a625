"""Termination finalizer `karpenter.sh/termination`: cordon, drain, terminate the instance, release.

Runs for karpy nodes that have a deletionTimestamp. Drain evicts through the Eviction API so the
API server enforces PodDisruptionBudgets: non-critical pods first, system-cluster-critical and
system-node-critical only once the others are gone (the order Karpenter 0.5 meant, not the one its
code had). DaemonSet and static pods are left to die with the node; a `do-not-evict` pod blocks the
drain. The instance is terminated only after the drain, then the node's NodeClaim (NodePool nodes)
is deleted, and the finalizer removed only after that.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum

from extender.api import labels
from extender.api.node import Node
from extender.api.pod import Pod
from extender.cloud.types import InstanceNotFoundError
from extender.cluster import nodeclaims
from extender.cluster.cordon import cordon
from extender.cluster.eviction import Outcome, evict
from extender.cluster.nodes import instance_id
from extender.lifecycle import metrics, nodepatch
from extender.lifecycle.context import Context


class Step(Enum):
    DONE = "done"  # finalizer removed (or not ours)
    WAIT = "wait"  # pods are terminating: look again shortly
    BACKOFF = "backoff"  # blocked (PDB, do-not-evict, API error): retry with backoff


@dataclass(frozen=True)
class DrainPlan:
    """Pure classification of a node's pods for one drain round."""

    blocking: tuple[Pod, ...]  # do-not-evict
    evict_now: tuple[Pod, ...]  # this round's tier, not yet terminating
    waiting: int  # pods still to go (terminating, or in the later tier)

    @property
    def drained(self) -> bool:
        return not self.blocking and not self.evict_now and self.waiting == 0


def plan_drain(pods: Sequence[Pod], now: datetime, stuck_after: float) -> DrainPlan:
    relevant = [
        p
        for p in pods
        if not p.is_terminal
        and not p.node_bound
        and not p.tolerates_unschedulable
        and not _stuck(p, now, stuck_after)
    ]
    blocking = tuple(p for p in relevant if p.do_not_evict and not p.deleting)
    non_critical = [p for p in relevant if not p.is_critical]
    tier = non_critical or [p for p in relevant if p.is_critical]
    evict_now = tuple(p for p in tier if not p.deleting and not p.do_not_evict)
    return DrainPlan(
        blocking=blocking, evict_now=evict_now, waiting=len(relevant) - len(evict_now) - len(blocking)
    )


def _stuck(pod: Pod, now: datetime, stuck_after: float) -> bool:
    """A pod past its deletionTimestamp (+ slack) whose kubelet is gone would hold the drain forever."""
    return pod.deleted_at is not None and now > pod.deleted_at + timedelta(seconds=stuck_after)


class Terminator:
    def __init__(self) -> None:
        self._cordoned: set[str] = set()

    def reconcile(self, ctx: Context, node: Node) -> Step:
        node_name = node.name
        if labels.TERMINATION_FINALIZER not in node.finalizers:
            return Step.DONE
        ctx.mark(node_name, "terminating")
        if node_name not in self._cordoned and not node.unschedulable and cordon(ctx.kube, node_name):
            ctx.log.info("Cordoned node %s", node_name)
        self._cordoned.add(node_name)
        step = self._drain(ctx, node, nodepatch.pods_on_node(ctx.kube, node_name))
        if step is not Step.DONE:
            return step
        self._terminate_instance(ctx, node)
        nodeclaims.delete_for_node(ctx.kube, node)
        nodepatch.remove_finalizer(ctx.kube, node, labels.TERMINATION_FINALIZER)
        ctx.log.info("Deleted node %s", node_name)
        self._cordoned.discard(node_name)
        ctx.unmark(node_name)
        provisioner = node.provisioner
        if provisioner and ctx.provisioning is not None:
            # Otherwise status.resources keeps counting the node until the next launch.
            ctx.provisioning.refresh_status([provisioner])
        if node.deleted_at is not None:
            metrics.TERMINATION_DURATION.observe(max((ctx.clock() - node.deleted_at).total_seconds(), 0.0))
        return Step.DONE

    def _drain(self, ctx: Context, node: Node, pods: Sequence[Pod]) -> Step:
        node_name = node.name
        plan = plan_drain(pods, ctx.clock(), ctx.settings.lifecycle.stuck_pod_seconds)
        if plan.drained:
            return Step.DONE
        for pod in plan.blocking:
            message = f"Unable to drain node {node_name}, pod {pod.key} has do-not-evict annotation"
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

    def _terminate_instance(self, ctx: Context, node: Node) -> None:
        instance = instance_id(node.provider_id)
        if instance is None:
            return
        with contextlib.suppress(InstanceNotFoundError):  # already gone: that is what we wanted
            ctx.cloud.delete(instance)
        ctx.log.info("Terminated instance %s of node %s", instance, node.name)
