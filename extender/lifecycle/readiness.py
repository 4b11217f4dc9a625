"""Readiness and liveness: lift `karpenter.sh/not-ready` once Ready; terminate nodes that never join.

A node that has never been Ready (still carries the not-ready taint, or its kubelet never posted a
status) `registration_ttl` after creation is deleted; the termination finalizer then evicts the pods
bound to it, so their owners recreate them and provisioning sees them again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from extender.api import labels
from extender.api.node import Node
from extender.lifecycle import metrics, nodepatch
from extender.lifecycle.context import Context

NEVER_UPDATED_REASONS = ("", "NodeStatusNeverUpdated")


@dataclass(frozen=True)
class Decision:
    remove_taint: bool = False
    terminate: bool = False
    requeue_after: float | None = None


def never_joined(node: Node) -> bool:
    cond = node.ready_condition
    if cond is None:
        return True
    return cond.reason in NEVER_UPDATED_REASONS or node.has_taint(labels.NOT_READY_TAINT_KEY)


def decide(node: Node, registration_ttl: float, now: datetime) -> Decision:
    if node.ready:
        return Decision(remove_taint=node.has_taint(labels.NOT_READY_TAINT_KEY))
    if not never_joined(node):
        return Decision()  # was Ready once: a NotReady node is the node lifecycle controller's business
    created = node.created or now
    deadline = created + timedelta(seconds=registration_ttl)
    if now >= deadline:
        return Decision(terminate=True)
    return Decision(requeue_after=(deadline - now).total_seconds())


def reconcile(ctx: Context, node: Node) -> float | None:
    node_name = node.name
    decision = decide(node, ctx.settings.lifecycle.registration_ttl_seconds, ctx.clock())
    if decision.remove_taint:
        nodepatch.remove_taint(ctx.kube, node, labels.NOT_READY_TAINT_KEY)
        ctx.log.info("Removed %s taint from ready node %s", labels.NOT_READY_TAINT_KEY, node_name)
    if decision.terminate:
        ctx.mark(node_name, "failed to join")
        ctx.log.info("Triggering termination for node that failed to join %s", node_name)
        metrics.NODES_TERMINATED.labels(reason="liveness").inc()
        nodepatch.delete_node(ctx.kube, node_name)
    return decision.requeue_after
