"""`karpy explain node NAME`: why consolidation is or is not taking this node now — each blocker
with its numbers (a PDB and the disruptions it allows, a do-not-disrupt pod or node,
consolidateAfter left, the disruption budget and its window, pods pending for its pool, nodes
still launching, a saving below the pool's threshold or Balanced's score) and the best move the
solver finds for it alone, with its $/h saving (consolidation/explain.py).

Offline on files when `--existing` is given (the same files and flags as `karpy plan --existing
FILE --consolidate`); otherwise live, read once through karpy's adapters. The controller keeps each
node's last pod event in memory, so neither path knows it: `consolidateAfter` counts here from the
newest start of the node's pods, or the node's creation (a pod deleted since is not seen). The
controller writes its own verdict, from its pod events, as the `Consolidatable` condition of the
node's NodeClaim (consolidation/verdict.py).
"""

from __future__ import annotations

import argparse
import json

from extender.api.pod import Pod
from extender.cli import inputs
from extender.cli import plan as plan_cli
from extender.cli.consolidation import cluster_view
from extender.cli.main import UsageError
from extender.lifecycle.consolidation import explain
from extender.lifecycle.consolidation.view import ClusterView, Settings
from extender.settings import from_env


def register(what: argparse._SubParsersAction) -> None:
    """Adds `node` to `karpy explain` (cli/explain.py calls this)."""
    node = what.add_parser("node", help="why consolidation takes a node or leaves it")
    node.add_argument("name", help="the Node's name")
    node.add_argument("--pods", help="offline: pending pods (they hold their Provisioner's consolidation)")
    inputs.add_flags(node)
    node.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    view = _offline(args) if args.existing else _live(args)
    # The controller's own setting (KARPY_LIFECYCLE_*), so the CLI judges age as the controller does.
    lifecycle = from_env().lifecycle
    settings = Settings(min_node_age_seconds=lifecycle.consolidation_min_node_age_seconds)
    try:
        result = explain.explain_node(view, args.name, settings)
    except KeyError:
        raise UsageError(f"node {args.name} not found") from None
    if args.output == "json":
        print(json.dumps(explain.as_json(result), indent=2))
    else:
        print(explain.render(result))
    return 0


def _offline(args: argparse.Namespace) -> ClusterView:
    docs = [doc for _, doc in plan_cli._documents(args.existing)]
    pending: list[Pod] = []
    if args.pods:
        pod_docs = [doc for _, doc in plan_cli._documents(args.pods)]
        pending = plan_cli.load_pods(args.pods, pod_docs, plan_cli.load_volumes(pod_docs)).pods
    return cluster_view(
        docs,
        provisioners=plan_cli.load_provisioners(args.provisioner),
        catalog=inputs.catalog(args),
        daemonsets=plan_cli.load_daemonsets(args.daemonsets) if args.daemonsets else [],
        pending=pending,
        pod_events=True,
    )


def _live(args: argparse.Namespace) -> ClusterView:
    read = inputs.live(args)
    loaded = plan_cli.load_pods(
        "the cluster", [{**p, "kind": "Pod"} for p in read.pending], plan_cli.load_volumes(())
    )
    return cluster_view(
        read.cluster,
        provisioners=read.provisioners,
        catalog=inputs.catalog(args),
        daemonsets=read.daemon_pods,
        pending=loaded.pods,
        pod_events=True,
    )
