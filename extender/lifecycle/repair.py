"""Node repair: replace a node that was Ready and then stays unhealthy past its policy's toleration.

Karpenter's node health controller (kubernetes-sigs/karpenter pkg/controllers/node/health): the
node's conditions are matched against the repair policies (api/repair_policies.py); the one due first decides;
before its `lastTransitionTime + toleration` the node is looked at again then. Past it, the node is
deleted forcefully: its drain deadline is now (`karpy.sh/termination-timestamp`, read by
termination.deadline_of), so PDBs and do-not-disrupt do not hold it and disruption budgets are not
consulted. Never when more than 20 % of its NodePool's/Provisioner's nodes are unhealthy (rounded up,
as a PDB's percentage: one of three may be): a `NodeRepairBlocked` Event instead, since a fault that
wide is the zone's or the AMI's, and replacing the nodes would not fix it.

A node that never joined is readiness.py's (the registration TTL), not repair's. Off unless
`KARPY_LIFECYCLE_NODE_REPAIR` (Karpenter's NodeRepair feature gate, off by default there too).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from extender.api import labels
from extender.api.meta import format_time
from extender.api.node import Node
from extender.api.repair_policies import REPAIR_POLICIES, RepairPolicy, Unhealthy
from extender.lifecycle import metrics, nodepatch, readiness
from extender.lifecycle.context import Context

#: Karpenter's allowedUnhealthyPercent.
ALLOWED_UNHEALTHY = 0.2
#: A repair blocked by its pool's health is looked at again after this long.
BLOCKED_RECHECK_SECONDS = 60.0


@dataclass(frozen=True)
class Due:
    condition: Unhealthy
    toleration_seconds: float
    at: datetime


def due(node: Node, now: datetime, policies: Sequence[RepairPolicy] = REPAIR_POLICIES) -> Due | None:
    """The node's unhealthy condition whose toleration ends first (None: healthy, or never joined).
    A condition with no lastTransitionTime is counted from the node's creation."""
    if readiness.never_joined(node):
        return None
    found: Due | None = None
    for cond in node.unhealthy:
        for policy in policies:
            if (policy.condition_type, policy.status) != (cond.condition_type, cond.status):
                continue
            since = cond.since or node.created or now
            at = since + timedelta(seconds=policy.toleration_seconds)
            if found is None or at < found.at:
                found = Due(cond, policy.toleration_seconds, at)
    return found


def unhealthy(node: Node, policies: Sequence[RepairPolicy] = REPAIR_POLICIES) -> bool:
    return any(
        (p.condition_type, p.status) == (c.condition_type, c.status) for c in node.unhealthy for p in policies
    )


def pool_healthy(
    nodes: Sequence[Node], policies: Sequence[RepairPolicy] = REPAIR_POLICIES
) -> tuple[bool, int]:
    """(at most 20 % of `nodes` unhealthy, rounded up; how many are)."""
    count = sum(1 for n in nodes if unhealthy(n, policies))
    return count <= math.ceil(ALLOWED_UNHEALTHY * len(nodes)), count


@dataclass(frozen=True)
class Outcome:
    #: Seconds until the node should be looked at again (None: nothing pending).
    requeue_after: float | None = None
    #: The node's deletion was requested: nothing else is decided for it in this pass.
    terminated: bool = False


def reconcile(ctx: Context, node: Node, pool: Sequence[Node]) -> Outcome:
    """Repair `node` if due. `pool`: every node of its NodePool/Provisioner, itself included."""
    if not ctx.settings.lifecycle.node_repair or node.deleting:
        return Outcome()
    now = ctx.clock()
    found = due(node, now)
    if found is None:
        return Outcome()
    if now < found.at:
        return Outcome(requeue_after=(found.at - now).total_seconds())
    cond = found.condition
    what = f"{cond.condition_type}={cond.status} for more than {_minutes(found.toleration_seconds)}"
    healthy, count = pool_healthy(pool)
    if not healthy:
        message = (
            f"Cannot repair node {node.name} ({what}): {count} of {len(pool)} nodes of {node.provisioner} "
            f"are unhealthy, more than {ALLOWED_UNHEALTHY:.0%}"
        )
        ctx.log.info(message)
        ctx.recorder.node(node, "NodeRepairBlocked", message, warning=True)
        metrics.disruption("unhealthy", "blocked")
        return Outcome(requeue_after=BLOCKED_RECHECK_SECONDS)
    nodepatch.set_annotation(ctx.kube, node.name, labels.TERMINATION_TIMESTAMP_ANNOTATION, format_time(now))
    ctx.mark(node.name, "unhealthy")
    ctx.log.info("Triggering termination for unhealthy node %s (%s)", node.name, what)
    ctx.recorder.node(
        node, "Unhealthy", f"Repairing node: {what}, replaced without waiting for its drain", warning=True
    )
    metrics.NODES_TERMINATED.labels(reason="unhealthy").inc()
    with metrics.disrupting("unhealthy"):
        nodepatch.delete_node(ctx.kube, node.name)
    return Outcome(terminated=True)


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:g}m" if seconds >= 60 else f"{seconds:g}s"
