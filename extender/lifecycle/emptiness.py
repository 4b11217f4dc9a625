"""Emptiness TTL (`ttlSecondsAfterEmpty`, v1 WhenEmpty's `consolidateAfter`): annotate empty nodes,
terminate them when the TTL runs out, within the Provisioner's "Empty" disruption budget, unless the
node is annotated `karpenter.sh/do-not-disrupt`.

`decide` is pure (node, its pods, TTL, now -> what to do and when to look again); `reconcile`
applies it. The node is requeued exactly at timestamp + TTL, so nothing polls.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum

from extender.api import labels
from extender.api.meta import format_time, parse_time
from extender.api.node import Node
from extender.api.pod import Pod
from extender.lifecycle import horizon, metrics, nodepatch, protection
from extender.lifecycle.context import Context, go_duration


class Action(Enum):
    NONE = "none"
    ADD = "add"
    REMOVE = "remove"
    TERMINATE = "terminate"


@dataclass(frozen=True)
class Decision:
    action: Action
    #: Seconds until this node must be looked at again for emptiness; None = only on change.
    requeue_after: float | None = None
    #: Why a due node is kept (a do-not-disrupt annotation), counted as a blocked decision.
    blocked: str | None = None


def decide(node: Node, pods: Sequence[Pod], ttl: float | None, now: datetime) -> Decision:
    stamp_raw = node.annotations.get(labels.EMPTINESS_TIMESTAMP_ANNOTATION)
    if ttl is None or node.deleting:
        return Decision(Action.REMOVE if stamp_raw and ttl is None else Action.NONE)
    if not node.ready:
        return Decision(Action.NONE)
    if nodepatch.workload(pods):
        return Decision(Action.REMOVE if stamp_raw else Action.NONE)
    try:
        stamp = parse_time(stamp_raw)
    except ValueError:
        stamp = None  # a hand-edited annotation: start the TTL afresh
    if stamp is None:
        return Decision(Action.ADD, requeue_after=ttl)
    due = horizon.after(stamp, ttl)
    if due is None:
        return Decision(Action.NONE)  # a TTL past the calendar never runs out (horizon.py)
    if now >= due:
        # karpenter.sh/do-not-disrupt on the node keeps it; its annotation's removal is a node
        # event that brings it back here.
        if (blocker := protection.node_blocker(node.annotations, pods)) is not None:
            return Decision(Action.NONE, blocked=blocker)
        return Decision(Action.TERMINATE)
    return Decision(Action.NONE, requeue_after=(due - now).total_seconds())


#: How often a due empty node waiting for a slot of its disruption budget is looked at again.
BUDGET_POLL_SECONDS = 2.0
#: How often a due empty node holding room for a pod kube-scheduler binds is looked at again
#: (a hold ends with the bind, the pod's deletion, or its deadline).
HOLD_POLL_SECONDS = 10.0


def _holds_room(ctx: Context, node: str) -> bool:
    reservation = getattr(ctx.state, "reservation", None)
    return bool(reservation is not None and reservation(node)[0])


def reconcile(
    ctx: Context,
    node: Node,
    pods: Sequence[Pod],
    ttl: float | None,
    *,
    admit: Callable[[], bool] | None = None,
) -> float | None:
    """Apply `decide`; returns seconds until the next emptiness check (None = none scheduled).

    `admit` takes a slot of the Provisioner's disruption budget before the delete; False = wait."""
    node_name = node.name
    now = ctx.clock()
    decision = decide(node, pods, ttl, now)
    if decision.blocked is not None:
        metrics.disruption("empty", "blocked")
        ctx.log.debug("Empty node %s is not disrupted, %s", node_name, decision.blocked)
    if decision.action is Action.ADD:
        nodepatch.set_annotation(ctx.kube, node_name, labels.EMPTINESS_TIMESTAMP_ANNOTATION, format_time(now))
        ctx.log.info("Added TTL to empty node %s", node_name)
    elif decision.action is Action.REMOVE:
        nodepatch.set_annotation(ctx.kube, node_name, labels.EMPTINESS_TIMESTAMP_ANNOTATION, None)
        ctx.unmark(node_name)
        ctx.log.info("Removed emptiness TTL from node %s", node_name)
    elif decision.action is Action.TERMINATE:
        # Keep kube-scheduler off the node before the delete lands (the extender guard reads the
        # mark), then look again: a pod bound (or room held) between our read and the mark wins
        # over the TTL.
        if _holds_room(ctx, node_name):
            # Room held for a pod kube-scheduler binds (provisioning's nomination): not empty yet.
            ctx.log.debug("Empty node %s holds room for a pod kube-scheduler binds", node_name)
            return HOLD_POLL_SECONDS
        ctx.mark(node_name, "empty")
        if nodepatch.workload(nodepatch.pods_on_node(ctx.kube, node_name)) or _holds_room(ctx, node_name):
            ctx.unmark(node_name)
            return 0.0
        # The budget slot is taken last, so it is held only by a node that is really deleted.
        if admit is not None and not admit():
            metrics.disruption("empty", "blocked")
            ctx.unmark(node_name)
            ctx.log.debug("Empty node %s waits for a disruption slot", node_name)
            return BUDGET_POLL_SECONDS
        ctx.log.info("Triggering termination after %s for empty node %s", go_duration(ttl or 0), node_name)
        metrics.NODES_TERMINATED.labels(reason="emptiness").inc()
        with metrics.disrupting("empty"):
            nodepatch.delete_node(ctx.kube, node_name)
    return decision.requeue_after
