"""Nodes, pods and PDBs -> ClusterView: the controller's worker and `karpy plan --consolidate` build
the same view.

Pure functions over Node and Pod models (the nodes, the pods bound to them, pending pods) and
PodDisruptionBudget API JSON; what is cordoned, deleting, marked for removal or holding a
disruption slot is `disrupting`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from extender.api import labels as wk
from extender.api.affinity import LabelSelector
from extender.api.disruption import DO_NOT_DISRUPT
from extender.api.node import Node
from extender.api.pod import Pod
from extender.api.provisioner import Provisioner, Requirement
from extender.cluster import inventory
from extender.lifecycle.consolidation.view import ClusterView, NodeState, PdbAllowance
from extender.scheduling import reservations
from extender.scheduling.instancetypes import InstanceType, OfferingKey
from extender.scheduling.overlays import overlaid

SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def price(instance_types: Mapping[str, InstanceType], node_labels: Mapping[str, str]) -> float:
    """$/h of the node's offering (type, zone, capacity type); 0 when the catalog does not know it.
    A reserved node is priced as the planner priced it (reservations.py: on-demand / 10,000,000),
    whether or not its reservation is still in the catalog, so it is never "free" to keep."""
    it = instance_types.get(node_labels.get(wk.INSTANCE_TYPE, ""))
    if it is None:
        return 0.0
    zone = node_labels.get(wk.ZONE)
    capacity = node_labels.get(wk.CAPACITY_TYPE, wk.CAPACITY_TYPE_ON_DEMAND)
    if capacity == wk.CAPACITY_TYPE_RESERVED:
        return reservations.reserved_price(it)
    prices = [o.price for o in it.offerings if o.capacity_type == capacity and o.zone in (zone, None)]
    prices = prices or [o.price for o in it.offerings if o.capacity_type == capacity]
    return min(prices, default=0.0)


def pdb_allowance(pdb: Mapping[str, Any]) -> PdbAllowance | None:
    """policy/v1 PodDisruptionBudget -> its current allowance; None for a null selector (covers nothing)."""
    raw = (pdb.get("spec") or {}).get("selector")
    if raw is None:
        return None
    exprs = tuple(
        Requirement(str(e.get("key")), str(e.get("operator")), tuple(str(v) for v in e.get("values") or ()))
        for e in raw.get("matchExpressions") or ()
        if e.get("operator") in SELECTOR_OPERATORS
    )
    selector = LabelSelector(
        match_labels=tuple(sorted((str(k), str(v)) for k, v in (raw.get("matchLabels") or {}).items())),
        match_expressions=exprs,
    )
    meta = pdb.get("metadata") or {}
    return PdbAllowance(
        namespace=str(meta.get("namespace") or "default"),
        selector=selector,
        disruptions_allowed=int((pdb.get("status") or {}).get("disruptionsAllowed") or 0),
        name=str(meta.get("name") or ""),
    )


def build(
    *,
    provisioners: Sequence[Provisioner],
    instance_types: Sequence[InstanceType],
    nodes: Iterable[Node],
    bound: inventory.Bound,
    pending: Iterable[Pod] = (),
    pdbs: Iterable[Mapping[str, Any]] = (),
    daemonsets: Sequence[Pod] = (),
    now: datetime,
    marked: Collection[str] = (),
    batch_in_flight: bool = False,
    namespaces: Mapping[str, Mapping[str, str]] | None = None,
    unavailable: frozenset[OfferingKey] = frozenset(),
    pod_events: Mapping[str, datetime] | None = None,
) -> ClusterView:
    """`bound`: the pods bound to `nodes` (the bound-pod index's snapshot, or
    `boundpods.group(manifests)`); `pending`: readable, live pending pods (`inventory.parse_pods`);
    `pod_events`: node -> its last pod event (podevents.py; a node missing from it counts from its
    creation, None: nothing is known and `consolidateAfter` holds every node)."""
    by_type = {t.name: t for t in instance_types}
    # A node is priced as its pool sees its type: with the pool's NodeOverlays.
    by_pool = {p.name: {t.name: t for t in overlaid(instance_types, p)} for p in provisioners if p.overlays}
    models = list(nodes)
    # Marked and budget-holding nodes take no pods, as in provisioning's inventory.
    built = inventory.build(models, bound, dict.fromkeys(marked, "leaving"))
    states = []
    for model, existing in zip(models, built.existing, strict=True):
        created = model.created
        last = pod_events.get(model.name, created) if pod_events is not None else None
        states.append(
            NodeState(
                node=existing,
                price=price(by_pool.get(wk.owner_of(existing.labels) or "", by_type), existing.labels),
                capacity_type=existing.labels.get(wk.CAPACITY_TYPE, wk.CAPACITY_TYPE_ON_DEMAND),
                age_seconds=(now - created).total_seconds() if created else 0.0,
                karpy=model.is_karpy,
                ready=model.ready,
                disrupting=model.deleting or model.unschedulable or model.name in marked,
                do_not_consolidate=model.annotations.get(wk.DO_NOT_CONSOLIDATE_ANNOTATION) == "true",
                do_not_disrupt=model.annotations.get(DO_NOT_DISRUPT) == "true",
                idle_seconds=(now - last).total_seconds() if last is not None else None,
            )
        )
    waiting = [p for p in pending if not p.deleting and not p.is_daemonset]
    return ClusterView(
        provisioners=tuple(provisioners),
        instance_types=tuple(instance_types),
        nodes=tuple(states),
        pdbs=tuple(a for pdb in pdbs if (a := pdb_allowance(pdb)) is not None),
        daemonsets=tuple(daemonsets),
        pending=tuple(waiting),
        batch_in_flight=batch_in_flight,
        namespaces=namespaces,
        unavailable=unavailable,
        now=now,
    )
