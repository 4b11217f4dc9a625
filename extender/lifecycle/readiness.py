"""Readiness and liveness: lift `karpenter.sh/not-ready` once Ready; terminate nodes that never join.

The taint stays on a Ready node while the provisioning batch that launched it still binds (its pods
and its sibling nodes' pods): kube-scheduler then places nothing on the batch's nodes before karpy
has bound what it planned there.

A node that has never been Ready (still carries the not-ready taint, or its kubelet never posted a
status) `registration_ttl` after creation is deleted; the termination finalizer then evicts the pods
bound to it, so their owners recreate them and provisioning sees them again.

`initialized` is Karpenter's Initialized condition for a node alone (nodeclaim.lifecycle): drift
replaces only initialized nodes, and a replacement counts as up only once initialized.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from extender.api import labels
from extender.api import nodeclaim as nc
from extender.api.node import Node
from extender.api.provisioner import Provisioner
from extender.api.resources import Resources
from extender.lifecycle import metrics, nodepatch
from extender.lifecycle.context import Context

NEVER_UPDATED_REASONS = ("", "NodeStatusNeverUpdated")
#: How soon a Ready node whose taint waits for its batch's binds is looked at again.
BATCH_BINDING_REQUEUE_SECONDS = 0.2


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


def initialized(node: Node, requests: Resources | None = None) -> bool:
    """Registered (kubelet posted its status), Ready, none of the startup taints recorded at launch
    nor a known ephemeral taint left (the not-ready taint included), every requested resource
    registered: Karpenter's Initialized (`pkg/controllers/nodeclaim/lifecycle/initialization.go`),
    judged from the node alone."""
    conditions = nc.lifecycle((), node, startup_taints=node.startup_taints, requests=requests, now=_EPOCH)
    found = nc.get(conditions, nc.INITIALIZED)
    return found is not None and found.status == nc.TRUE


#: `nc.lifecycle` stamps transition times; `initialized` only reads the status.
_EPOCH = datetime.fromtimestamp(0, UTC)


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


def reconcile(ctx: Context, node: Node, pool: Provisioner | None = None) -> float | None:
    """`pool`: the node's Provisioner/NodePool, told (through provisioning) when the node joins or
    never does, for its launch backoff and NodeRegistrationHealthy."""
    node_name = node.name
    ttl = ctx.settings.lifecycle.registration_ttl_seconds
    decision = decide(node, ttl, ctx.clock())
    if decision.remove_taint and ctx.state is not None and ctx.state.binding(node_name):
        # The taint keeps kube-scheduler off the node until the batch that launched it has bound
        # its pods (ClusterState.binding_to).
        return BATCH_BINDING_REQUEUE_SECONDS
    if decision.remove_taint:
        nodepatch.remove_taint(ctx.kube, node, labels.NOT_READY_TAINT_KEY)
        ctx.log.info("Removed %s taint from ready node %s", labels.NOT_READY_TAINT_KEY, node_name)
        if pool is not None and ctx.provisioning is not None:
            ctx.provisioning.joined(pool)
    if decision.terminate:
        ctx.mark(node_name, "failed to join")
        ctx.log.info("Triggering termination for node that failed to join %s", node_name)
        if pool is not None and ctx.provisioning is not None:
            ctx.provisioning.registration_failed(
                pool, f"node {node_name} did not become Ready within {ttl:g}s of its creation"
            )
        metrics.NODES_TERMINATED.labels(reason="liveness").inc()
        nodepatch.delete_node(ctx.kube, node_name)
    return decision.requeue_after
