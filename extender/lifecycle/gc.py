"""Garbage collection between the cloud and the cluster, both directions.

- An instance tagged for this cluster with no Node for longer than the grace is terminated: a
  launch whose Node was never created (crash between CreateFleet and Node create) or a Node deleted
  without its finalizer.
- A karpy Node whose instance is gone is deleted (its finalizer then drains it and finds the
  instance already terminated).
- A NodeClaim whose node and instance are both gone is deleted and its `karpenter.sh/termination`
  finalizer lifted (its node's termination would have done so, unless that failed or the node went
  without its finalizer); one already being deleted is finished at once, without the grace.
NodeClaims are listed before Nodes, and Nodes before instances, so that an object listed always has
what it points at in the later list unless that is really gone.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from extender.api import nodeclaim
from extender.api.node import Node
from extender.cloud.types import Instance, InstanceNotFoundError
from extender.cluster import nodeclaims
from extender.cluster.errors import ClusterError
from extender.cluster.nodes import instance_id, list_karpy_nodes
from extender.cluster.quarantine import Quarantine, short
from extender.lifecycle import metrics, nodepatch
from extender.lifecycle.context import Context, go_duration


@dataclass(frozen=True)
class Garbage:
    instances: tuple[Instance, ...]
    nodes: tuple[str, ...]
    claims: tuple[str, ...] = ()


def find_garbage(
    nodes: Sequence[Node],
    instances: Iterable[Instance],
    now: datetime,
    grace: float,
    *,
    protected: frozenset[str] = frozenset(),
) -> Garbage:
    """Pure: orphan instances (no Node, older than grace, not `protected`) and Nodes without instances."""
    cutoff = now - timedelta(seconds=grace)
    live = {i.id: i for i in instances}
    node_instances: dict[str, str] = {}
    for node in nodes:
        iid = instance_id(node.provider_id)
        if iid:
            node_instances[iid] = node.name
    orphans = tuple(
        i
        for i in live.values()
        if i.id not in node_instances
        and i.id not in protected
        and (i.launch_time is None or i.launch_time <= cutoff)
    )
    dangling = tuple(
        n.name
        for n in nodes
        if n.is_karpy
        and not n.deleting
        and (iid := instance_id(n.provider_id)) is not None
        and iid not in live
        and (n.created or now) <= cutoff
    )
    return Garbage(instances=orphans, nodes=dangling)


def orphan_claims(
    claims: Sequence[nodeclaim.Record],
    nodes: Sequence[Node],
    instances: Iterable[Instance],
    now: datetime,
    grace: float,
) -> tuple[str, ...]:
    """Pure: the NodeClaims older than `grace`, or being deleted, whose node (by name or provider id)
    and instance are both gone."""
    cutoff = now - timedelta(seconds=grace)
    names = {n.name for n in nodes}
    held = {iid for n in nodes if (iid := instance_id(n.provider_id))} | {i.id for i in instances}
    return tuple(
        c.name
        for c in claims
        if c.node_name not in names
        and instance_id(c.provider_id) not in held
        and (c.deleting or (c.created or now) <= cutoff)
    )


#: NodeClaims that do not read (hand-made, malformed): left out of the collection, reported once.
UNREADABLE_CLAIMS = Quarantine("NodeClaim")


def _record(ctx: Context, claim: Any) -> nodeclaim.Record | None:
    """A claim's Record; None (left alone, reported once per resourceVersion) when it does not read."""
    try:
        return nodeclaim.Record.from_manifest(claim)
    except Exception as err:  # one claim's boundary: the collection goes on
        meta = claim.get("metadata") if isinstance(claim, Mapping) else None
        meta = meta if isinstance(meta, Mapping) else {}
        name, message = str(meta.get("name") or "?"), f"{type(err).__name__}: {err}"
        if UNREADABLE_CLAIMS.failed(name, str(meta.get("resourceVersion") or ""), message):
            ctx.log.error("Ignoring unreadable nodeclaim %s, %s", name, short(message))
        return None


def _claims(ctx: Context) -> list[nodeclaim.Record]:
    """Every NodeClaim; none when they cannot be listed: the records must not stop the collection
    of instances and nodes."""
    try:
        return [r for c in nodeclaims.list_claims(ctx.kube) if (r := _record(ctx, c)) is not None]
    except ClusterError as err:
        ctx.log.warning("Listing nodeclaims for garbage collection, %s", err)
        return []


def collect(ctx: Context, *, protected: frozenset[str] = frozenset()) -> Garbage:
    """One GC pass; returns what it removed."""
    claims = _claims(ctx)
    nodes = list_karpy_nodes(ctx.kube)
    instances = ctx.cloud.list()
    now, grace = ctx.clock(), ctx.settings.lifecycle.gc_grace_seconds
    garbage = find_garbage(nodes, instances, now, grace, protected=protected)
    garbage = replace(garbage, claims=orphan_claims(claims, nodes, instances, now, grace))
    for instance in garbage.instances:
        if not ctx.is_leader():
            break
        age = ctx.clock() - instance.launch_time if instance.launch_time else None
        ctx.log.info(
            "Garbage collecting instance %s with no node%s",
            instance.id,
            f" after {go_duration(age.total_seconds())}" if age else "",
        )
        with contextlib.suppress(InstanceNotFoundError):
            ctx.cloud.delete(instance.id)
        metrics.GC_INSTANCES.inc()
    for name in garbage.nodes:
        if not ctx.is_leader():
            break
        ctx.log.info("Garbage collecting node %s whose instance is gone", name)
        ctx.mark(name, "instance gone")
        nodepatch.delete_node(ctx.kube, name)
        metrics.GC_NODES.inc()
    for name in garbage.claims:
        if not ctx.is_leader():
            break
        ctx.log.info("Garbage collecting nodeclaim %s whose node and instance are gone", name)
        nodeclaims.remove(ctx.kube, name)
    return garbage
