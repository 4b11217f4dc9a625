"""`karpy plan --existing FILE --consolidate`: the consolidation actions karpy would take on a
cluster snapshot, one after another within the disruption budgets, printed and never taken.

The snapshot is what `kubectl get nodes,pods,pdb,namespaces -A -o yaml` prints; node ages are
measured from now. Pods in `--pods` count as pending (they hold their Provisioner's consolidation).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from extender.api.meta import parse_time_or_none
from extender.api.node import Node
from extender.api.pod import Pod
from extender.api.provisioner import Provisioner
from extender.cli.main import UsageError
from extender.cluster import boundpods
from extender.cluster.namespaces import labels_by_name
from extender.lifecycle.consolidation import snapshot
from extender.lifecycle.consolidation.decide import Action, plan
from extender.lifecycle.consolidation.view import ClusterView
from extender.scheduling.instancetypes import InstanceType


def run(
    args: argparse.Namespace,
    documents: Sequence[tuple[int, Any]],
    *,
    provisioners: Sequence[Provisioner],
    catalog: Sequence[InstanceType],
    daemonsets: Sequence[Pod],
    pending: Sequence[Pod],
) -> int:
    if not args.existing:
        raise UsageError("--consolidate needs --existing (the cluster to consolidate)")
    view = cluster_view(
        (doc for _, doc in documents),
        provisioners=provisioners,
        catalog=catalog,
        daemonsets=daemonsets,
        pending=pending,
    )
    actions = plan(view)
    if args.output == "json":
        print(json.dumps([_json(a) for a in actions], indent=2))
    else:
        for action in actions:
            print(action.describe())
        saving = sum(a.saving for a in actions)
        print(f"{len(actions)} consolidation action(s), saving ${saving:.3f}/h (nothing was changed)")
    return 0


def cluster_view(
    documents: Iterable[Any],
    *,
    provisioners: Sequence[Provisioner],
    catalog: Sequence[InstanceType],
    daemonsets: Sequence[Pod],
    pending: Sequence[Pod],
    pod_events: bool = False,
) -> ClusterView:
    """The consolidation view of Node, Pod, PodDisruptionBudget and Namespace objects (API JSON),
    node ages measured from now; `pending` hold their Provisioner's consolidation. `pod_events`:
    each node's last pod event is taken as its newest pod's start (or its own creation), else none
    is known and `consolidateAfter` holds every node."""
    kinds: dict[str, list[Any]] = {"Node": [], "Pod": [], "PodDisruptionBudget": [], "Namespace": []}
    for doc in documents:
        kinds.setdefault(str(doc.get("kind")), []).append(doc)
    view = snapshot.build(
        provisioners=provisioners,
        instance_types=catalog,
        nodes=[Node.from_manifest(n) for n in kinds["Node"]],
        bound=boundpods.group(kinds["Pod"]),
        pdbs=kinds["PodDisruptionBudget"],
        daemonsets=daemonsets,
        now=datetime.now(UTC),
        namespaces=labels_by_name(kinds["Namespace"]) or None,
        pod_events=last_pod_starts(kinds["Pod"]) if pod_events else None,
    )
    return dataclasses.replace(view, pending=tuple(pending))


def last_pod_starts(pods: Iterable[Mapping[str, Any]]) -> dict[str, datetime]:
    """Node -> the newest start (else creation) of the pods bound to it: the last pod event a
    snapshot shows (a pod deleted since leaves no trace in it)."""
    found: dict[str, datetime] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        meta, status = pod.get("metadata") or {}, pod.get("status") or {}
        at = parse_time_or_none(status.get("startTime")) or parse_time_or_none(meta.get("creationTimestamp"))
        if node and at is not None and (node not in found or at > found[node]):
            found[node] = at
    return found


def _json(action: Action) -> dict[str, Any]:
    return {
        "method": action.method.value,
        "nodes": list(action.names),
        "replacements": [
            {
                "instanceType": new.instance_type.name,
                "capacityType": new.capacity_type,
                "zone": new.zone,
                "options": [t.name for t in new.options],
                "pods": [p.key for p in new.pods],
            }
            for new in action.replacements
        ],
        "pods": [p.key for p in action.pods],
        "priceBeforePerHour": round(action.price_before, 6),
        "priceAfterPerHour": round(action.price_after, 6),
    }
