"""`karpy explain pod NS/NAME` (or `--all-pending`): for every Provisioner and NodePool in weight
order, the node karpy would launch for the pod with only that pool, or the first rule that excludes
it; then the smallest change that would admit it, found by solving again with the change applied
(extender/scheduling/explain.py, remedy.py).

Offline on files when `--pods` is given (the same files and flags as `karpy plan`); otherwise live:
the pending pods, Provisioners, NodePools, nodes with their pods, Namespaces and DaemonSets from the
API server, the instance types from the configured EC2 endpoint.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from extender.api.pod import Pod
from extender.cli import plan as plan_cli
from extender.cli.main import UsageError
from extender.scheduling.catalog import CatalogError, build_catalog
from extender.scheduling.explain import Explanation, World, explain
from extender.scheduling.pricing import PriceBook
from extender.scheduling.remedy import MAX_CANDIDATES, Remedy, smallest_change

#: Pods `--all-pending` explains at most (each costs a solve per pool plus the candidate edits).
MAX_PODS = 50


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("explain", help="why a pod waits, and the smallest change that admits it")
    what = parser.add_subparsers(dest="what", metavar="WHAT")
    what.required = True
    pod = what.add_parser("pod", help="explain a pending pod")
    pod.add_argument("name", nargs="?", help="NAMESPACE/NAME (NAME alone: namespace default)")
    pod.add_argument("--all-pending", action="store_true", help=f"every pending pod (at most {MAX_PODS})")
    pod.add_argument("--pods", help="offline: the pods file, as `karpy plan --pods` reads it")
    pod.add_argument("--provisioner", action="append", default=[], help="offline: as `karpy plan`")
    pod.add_argument("--instance-types", help="DescribeInstanceTypes JSON; default: ask the EC2 endpoint")
    pod.add_argument("--offerings", help="DescribeInstanceTypeOfferings JSON")
    pod.add_argument("--zones", default=plan_cli.DEFAULT_ZONES, help="comma-separated zones")
    pod.add_argument("--prices", help='{"onDemand": {...}, "spot": {...}} price file')
    pod.add_argument("--daemonsets", help="offline: YAML stream of DaemonSets")
    pod.add_argument("--existing", help="offline: the cluster as it is, as `karpy plan --existing`")
    pod.add_argument("--kubeconfig", help="live: kubeconfig (default: KARPY_KUBECONFIG, in-cluster, ~/.kube)")
    pod.add_argument("--candidates", type=int, default=MAX_CANDIDATES, help="edits solved at most per pod")
    pod.add_argument("-o", "--output", choices=("text", "json"), default="text")
    pod.set_defaults(func=run)


@dataclass
class Inputs:
    pods: list[Pod]
    world: World
    #: pod key -> why karpy cannot read or plan it at all.
    unread: dict[str, str]


def run(args: argparse.Namespace) -> int:
    if bool(args.name) == bool(args.all_pending):
        raise UsageError("give one pod as NAMESPACE/NAME, or --all-pending")
    inputs = _offline(args) if args.pods else _live(args)
    wanted = _key(args.name) if args.name else None
    if wanted is not None and wanted in inputs.unread:
        raise UsageError(f"pod {wanted}: {inputs.unread[wanted]}")
    pods = [p for p in inputs.pods if wanted is None or p.key == wanted]
    if wanted is not None and not pods:
        raise UsageError(f"pod {wanted} not found among the pending pods")
    results = [_explain(pod, inputs.world, args.candidates) for pod in pods[:MAX_PODS]]
    if args.output == "json":
        print(json.dumps({"pods": [as_json(e, r) for e, r in results]}, indent=2))
    else:
        print("\n\n".join(render(e, r) for e, r in results) or "No pending pods.")
        if len(pods) > MAX_PODS:
            print(f"\n(+{len(pods) - MAX_PODS} more pending pods not explained)")
    return 0


def _key(name: str) -> str:
    return name if "/" in name else f"default/{name}"


def _explain(pod: Pod, world: World, limit: int) -> tuple[Explanation, Remedy | None]:
    found = explain(pod, world)
    if found.admitted:
        return found, None
    return found, smallest_change(found, world, limit=limit)[0]


def render(found: Explanation, remedy: Remedy | None) -> str:
    lines = [f"Pod {found.pod.key}"]
    if found.admitted and found.placement is not None:
        lines.append(
            f"  karpy can place it now: {found.placement.describe()} ({found.placement.provisioner})"
        )
    else:
        lines.append(f"  waits: {found.reason}")
    lines += [f"  {v.line()}" for v in found.verdicts]
    if not found.verdicts:
        lines.append("  no Provisioner or NodePool exists")
    if not found.admitted:
        lines.append(f"  change: {remedy.describe()}" if remedy else "  change: no single change found")
    return "\n".join(lines)


def as_json(found: Explanation, remedy: Remedy | None) -> dict[str, Any]:
    where = found.placement
    return {
        "pod": found.pod.key,
        "admitted": found.admitted,
        "reason": found.reason,
        "placement": None if where is None else _placement(where),
        "pools": [
            {
                "kind": v.pool.kind,
                "name": v.pool.name,
                "rule": v.rule,
                "message": v.message,
                **({"placement": _placement(v.placement)} if v.placement else {}),
            }
            for v in found.verdicts
        ],
        "change": None
        if remedy is None
        else {
            "target": remedy.edit.target,
            "description": remedy.edit.description,
            "edit": dict(remedy.edit.change),
            "placement": _placement(remedy.placement),
        },
    }


def _placement(where: Any) -> dict[str, Any]:
    return {
        "provisioner": where.provisioner,
        "node": where.node,
        "instanceType": where.instance_type,
        "zone": where.zone,
        "capacityType": where.capacity_type,
        "pricePerHour": round(where.price, 6),
    }


def _catalog(
    args: argparse.Namespace, types: list[dict[str, Any]], offerings: list[dict[str, Any]] | None
) -> Any:
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


def _offline(args: argparse.Namespace) -> Inputs:
    """As `karpy plan` reads its files."""
    pod_docs = [doc for _, doc in plan_cli._documents(args.pods)]
    existing_docs = [doc for _, doc in plan_cli._documents(args.existing)] if args.existing else []
    volumes = plan_cli.load_volumes([*pod_docs, *existing_docs])
    existing = (
        plan_cli.load_existing(args.existing, existing_docs, volumes)
        if args.existing
        else plan_cli.Existing()
    )
    loaded = plan_cli.load_pods(args.pods, pod_docs, volumes)
    world = World(
        plan_cli.load_provisioners(args.provisioner),
        _catalog(args, *_types(args)),
        daemonsets=plan_cli.load_daemonsets(args.daemonsets) if args.daemonsets else [],
        existing_nodes=existing.nodes,
        usage=existing.usage,
        namespaces=existing.namespaces,
    )
    return Inputs(loaded.pods, world, {**loaded.rejected, **loaded.unresolved})


def _live(args: argparse.Namespace) -> Inputs:
    """The cluster through karpy's adapters, read once."""
    from kubernetes import client

    from extender.cluster import client as kube_client
    from extender.cluster import pods as kube_pods
    from extender.cluster.namespaces import list_labels
    from extender.cluster.nodes import list_node_manifests
    from extender.cluster.provisioners import list_configured

    settings = plan_cli.plan_settings()
    if args.kubeconfig:
        settings.kubeconfig = args.kubeconfig
    with kube_client.load(settings) as kube:
        pending = kube_pods.list_pending(kube)[0]
        cluster = [
            *({**n, "kind": "Node"} for n in list_node_manifests(kube)),
            *({**p, "kind": "Pod"} for p in kube_pods.list_assigned(kube)),
        ]
        namespaces = list_labels(kube)
        provisioners = list_configured(kube, settings)
        daemonsets = kube_client.call_json(client.AppsV1Api(kube).list_daemon_set_for_all_namespaces)
    volumes = plan_cli.load_volumes(())
    existing = plan_cli.load_existing("the cluster", cluster, volumes)
    loaded = plan_cli.load_pods("the cluster", [{**p, "kind": "Pod"} for p in pending], volumes)
    daemon_pods = _daemon_pods(daemonsets.get("items") or [])
    world = World(
        provisioners,
        _catalog(args, *_types(args)),
        daemonsets=daemon_pods,
        existing_nodes=existing.nodes,
        usage=existing.usage,
        namespaces=namespaces,
    )
    return Inputs(loaded.pods, world, {**loaded.rejected, **loaded.unresolved})


def _daemon_pods(items: Sequence[Mapping[str, Any]]) -> list[Pod]:
    from extender.api.pod import PodError

    found = []
    for item in items:
        try:
            found.append(Pod.from_manifest(plan_cli._from_template({**item, "kind": "DaemonSet"}, 0)))
        except PodError:
            continue  # the controller leaves an unreadable DaemonSet's overhead out as well
    return found
