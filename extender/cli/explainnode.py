"""`karpy explain node NAME`: why consolidation is or is not taking this node now — each blocker
with its numbers (a PDB and the disruptions it allows, a do-not-disrupt pod or node,
consolidateAfter left, the disruption budget and its window, pods pending for its pool, nodes
still launching, a saving below the pool's threshold or Balanced's score) and the best move the
solver finds for it alone, with its $/h saving (consolidation/explain.py).

Offline on files when `--existing` is given (the same files and flags as `karpy plan --existing
FILE --consolidate`); otherwise live, read once through karpy's adapters. The controller keeps each
node's last pod event in memory, so neither path knows it: `consolidateAfter` counts from the
node's creation here.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from typing import Any

from extender.api.pod import Pod
from extender.cli import inputs
from extender.cli import plan as plan_cli
from extender.cli.consolidation import cluster_view
from extender.cli.main import UsageError
from extender.lifecycle.consolidation import explain
from extender.lifecycle.consolidation.view import ClusterView, Settings
from extender.settings import LifecycleSettings


def register(what: argparse._SubParsersAction) -> None:
    """Adds `node` to `karpy explain` (cli/explain.py calls this)."""
    node = what.add_parser("node", help="why consolidation takes a node or leaves it")
    node.add_argument("name", help="the Node's name")
    node.add_argument("--existing", help="offline: the cluster, as `karpy plan --existing` reads it")
    node.add_argument("--pods", help="offline: pending pods (they hold their Provisioner's consolidation)")
    node.add_argument("--provisioner", action="append", default=[], help="offline: as `karpy plan`")
    node.add_argument("--instance-types", help="DescribeInstanceTypes JSON; default: ask the EC2 endpoint")
    node.add_argument("--offerings", help="DescribeInstanceTypeOfferings JSON")
    node.add_argument("--zones", default=plan_cli.DEFAULT_ZONES, help="comma-separated zones")
    node.add_argument("--prices", help='{"onDemand": {...}, "spot": {...}} price file')
    node.add_argument("--daemonsets", help="offline: YAML stream of DaemonSets")
    node.add_argument(
        "--kubeconfig", help="live: kubeconfig (default: KARPY_KUBECONFIG, in-cluster, ~/.kube)"
    )
    node.add_argument("-o", "--output", choices=("text", "json"), default="text")
    node.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    view = _offline(args) if args.existing else _live(args)
    lifecycle = LifecycleSettings()
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
    )


def _live(args: argparse.Namespace) -> ClusterView:
    from kubernetes import client

    from extender.cluster import client as kube_client
    from extender.cluster import pods as kube_pods
    from extender.cluster.nodes import list_node_manifests
    from extender.cluster.provisioners import list_configured

    settings = plan_cli.plan_settings()
    if args.kubeconfig:
        settings.kubeconfig = args.kubeconfig
    with kube_client.load(settings) as kube:
        pending = kube_pods.list_pending(kube)[0]
        policy, core = client.PolicyV1Api(kube), client.CoreV1Api(kube)
        docs: list[Mapping[str, Any]] = [
            *({**n, "kind": "Node"} for n in list_node_manifests(kube)),
            *({**p, "kind": "Pod"} for p in kube_pods.list_assigned(kube)),
            *_items(
                kube_client.call_json(policy.list_pod_disruption_budget_for_all_namespaces),
                "PodDisruptionBudget",
            ),
            *_items(kube_client.call_json(core.list_namespace), "Namespace"),
        ]
        provisioners = list_configured(kube, settings)
        daemonsets = kube_client.call_json(client.AppsV1Api(kube).list_daemon_set_for_all_namespaces)
    loaded = plan_cli.load_pods(
        "the cluster", [{**p, "kind": "Pod"} for p in pending], plan_cli.load_volumes(())
    )
    return cluster_view(
        docs,
        provisioners=provisioners,
        catalog=inputs.catalog(args),
        daemonsets=inputs.daemon_pods(daemonsets.get("items") or []),
        pending=loaded.pods,
    )


def _items(listing: Mapping[str, Any], kind: str) -> Sequence[Mapping[str, Any]]:
    return [{**item, "kind": kind} for item in listing.get("items") or []]
