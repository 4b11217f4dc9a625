"""What the `karpy explain` commands read: the cluster once through karpy's adapters (`live`), the
instance-type catalog (files as `karpy plan` reads them, or the EC2 endpoint) and the pods
DaemonSets put on every node."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from extender.api.pod import Pod, PodError
from extender.api.provisioner import Provisioner
from extender.cli import plan as plan_cli
from extender.cli.main import UsageError
from extender.scheduling.catalog import CatalogError, build_catalog
from extender.scheduling.instancetypes import InstanceType
from extender.scheduling.pricing import PriceBook


def add_flags(parser: argparse.ArgumentParser) -> None:
    """The flags both explain commands read the world with: offline files as `karpy plan` takes
    them, or the live cluster."""
    parser.add_argument("--provisioner", action="append", default=[], help="offline: as `karpy plan`")
    parser.add_argument("--instance-types", help="DescribeInstanceTypes JSON; default: ask the EC2 endpoint")
    parser.add_argument("--offerings", help="DescribeInstanceTypeOfferings JSON")
    parser.add_argument("--zones", default=plan_cli.DEFAULT_ZONES, help="comma-separated zones")
    parser.add_argument("--prices", help='{"onDemand": {...}, "spot": {...}} price file')
    parser.add_argument("--daemonsets", help="offline: YAML stream of DaemonSets")
    parser.add_argument("--existing", help="offline: the cluster as it is, as `karpy plan --existing`")
    parser.add_argument(
        "--kubeconfig", help="live: kubeconfig (default: KARPY_KUBECONFIG, in-cluster, ~/.kube)"
    )
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")


def catalog(args: argparse.Namespace) -> list[InstanceType]:
    """From `--instance-types`/`--offerings` files, else the EC2 endpoint; `--zones`, `--prices`."""
    types, offerings = _types(args)
    zones = [z.strip() for z in args.zones.split(",") if z.strip()]
    try:
        prices = PriceBook.from_file(args.prices) if args.prices else PriceBook()
        return build_catalog(types, offerings=offerings, zones=zones, prices=prices)
    except (OSError, ValueError, CatalogError) as err:
        raise UsageError(str(err)) from err


def _types(args: argparse.Namespace) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
    if args.instance_types:
        types = plan_cli._json_file(args.instance_types, "InstanceTypes")
        offerings = plan_cli._json_file(args.offerings, "InstanceTypeOfferings") if args.offerings else None
        return types, offerings
    return plan_cli._from_ec2()


def daemon_pods(items: Sequence[Mapping[str, Any]]) -> list[Pod]:
    """The pod each DaemonSet (API JSON) puts on a node."""
    found = []
    for item in items:
        try:
            found.append(Pod.from_manifest(plan_cli._from_template({**item, "kind": "DaemonSet"}, 0)))
        except PodError:
            continue  # the controller leaves an unreadable DaemonSet's overhead out as well
    return found


@dataclass
class Live:
    #: Pending pods (API JSON).
    pending: Sequence[Mapping[str, Any]]
    #: Nodes and the pods bound to them, PodDisruptionBudgets and Namespaces (API JSON with `kind`).
    cluster: list[Mapping[str, Any]]
    provisioners: list[Provisioner]
    daemon_pods: list[Pod]


def live(args: argparse.Namespace) -> Live:
    """The cluster read once (`--kubeconfig`, else KARPY_KUBECONFIG, in-cluster, ~/.kube)."""
    from kubernetes import client

    from extender.cluster import client as kube_client
    from extender.cluster import pods as kube_pods
    from extender.cluster.nodes import list_node_manifests
    from extender.cluster.pool_resources import list_configured

    settings = plan_cli.plan_settings()
    if args.kubeconfig:
        settings.kubeconfig = args.kubeconfig
    with kube_client.load(settings) as kube:
        policy, core, apps = client.PolicyV1Api(kube), client.CoreV1Api(kube), client.AppsV1Api(kube)
        pending = kube_pods.list_pending(kube)[0]
        cluster = [
            *({**n, "kind": "Node"} for n in list_node_manifests(kube)),
            *({**p, "kind": "Pod"} for p in kube_pods.list_assigned(kube)),
            *_items(
                kube_client.call_json(policy.list_pod_disruption_budget_for_all_namespaces),
                "PodDisruptionBudget",
            ),
            *_items(kube_client.call_json(core.list_namespace), "Namespace"),
        ]
        provisioners = list_configured(kube, settings)
        daemonsets = kube_client.call_json(apps.list_daemon_set_for_all_namespaces)
    return Live(pending, cluster, provisioners, daemon_pods(daemonsets.get("items") or []))


def _items(listing: Mapping[str, Any], kind: str) -> list[Mapping[str, Any]]:
    return [{**item, "kind": kind} for item in listing.get("items") or []]
