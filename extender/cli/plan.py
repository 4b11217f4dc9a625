"""`karpy plan`: dry-run the scheduling core on YAML/JSON files and print the plan (table or JSON).

Reads pods (Pods, or Deployments/ReplicaSets/Jobs expanded into replicas), Provisioners, an EC2
DescribeInstanceTypes response (or asks the configured EC2 endpoint), optional offerings, prices
and DaemonSets; calls extender.scheduling.solver.solve. Unusable input raises UsageError (exit 2).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterator, Mapping
from typing import Any

from extender.api.pod import Pod, PodError
from extender.api.provisioner import Provisioner, default_provisioner, load_provisioner
from extender.cli.main import UsageError
from extender.scheduling.catalog import CatalogError, build_catalog
from extender.scheduling.pricing import PriceBook
from extender.scheduling.solver import SORT_KEYS, Plan, solve

DEFAULT_ZONES = "us-west-2a,us-west-2b,us-west-2c"
WORKLOAD_KINDS = ("Deployment", "ReplicaSet", "StatefulSet", "Job")


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("plan", help="compute which nodes karpy would launch for some pods (dry run)")
    parser.add_argument(
        "--pods", required=True, help="YAML stream of Pods / Deployments / ReplicaSets / Jobs"
    )
    parser.add_argument("--provisioner", action="append", default=[], help="Provisioner YAML (repeatable)")
    parser.add_argument("--instance-types", help="DescribeInstanceTypes JSON; default: ask the EC2 endpoint")
    parser.add_argument("--offerings", help="DescribeInstanceTypeOfferings JSON")
    parser.add_argument(
        "--zones", default=DEFAULT_ZONES, help=f"comma-separated zones (default {DEFAULT_ZONES})"
    )
    parser.add_argument("--prices", help='{"onDemand": {...}, "spot": {...}} price file')
    parser.add_argument("--daemonsets", help="YAML stream of DaemonSets whose pods land on every node")
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table")
    parser.add_argument("--sort-key", choices=SORT_KEYS, default="cpu")
    parser.set_defaults(func=run)


def _documents(path: str) -> Iterator[tuple[int, Mapping[str, Any]]]:
    import yaml

    try:
        with open(path, encoding="utf-8") as handle:
            docs = list(yaml.safe_load_all(handle))
    except OSError as err:
        raise UsageError(f"reading {path}: {err.strerror}") from err
    except yaml.YAMLError as err:
        raise UsageError(f"{path}: not YAML: {err}") from err
    for index, doc in enumerate(docs):
        if doc is None:
            continue
        if not isinstance(doc, Mapping):
            raise UsageError(f"{path} document {index}: expected an object")
        if doc.get("kind") == "List":
            for item in doc.get("items") or []:
                yield index, item
        else:
            yield index, doc


def _name(doc: Mapping[str, Any]) -> str:
    meta = doc.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name') or '<unnamed>'}"


def _from_template(owner: Mapping[str, Any], index: int) -> dict[str, Any]:
    """A Pod manifest for replica `index` of a workload's pod template."""
    kind = owner.get("kind")
    meta = owner.get("metadata") or {}
    template = (owner.get("spec") or {}).get("template") or {}
    template_meta = template.get("metadata") or {}
    return {
        "kind": "Pod",
        "metadata": {
            "name": f"{meta.get('name')}-{index}",
            "namespace": meta.get("namespace") or "default",
            "labels": template_meta.get("labels") or {},
            "annotations": template_meta.get("annotations") or {},
            "ownerReferences": [{"kind": kind, "name": meta.get("name"), "controller": True}],
        },
        "spec": template.get("spec") or {},
    }


def load_pods(path: str) -> list[Pod]:
    pods = []
    for _, doc in _documents(path):
        kind = doc.get("kind", "Pod")
        try:
            if kind == "Pod":
                pods.append(Pod.from_manifest(doc))
            elif kind in WORKLOAD_KINDS:
                spec = doc.get("spec") or {}
                count = spec.get("parallelism", 1) if kind == "Job" else spec.get("replicas", 1)
                if not isinstance(count, int) or count < 0:
                    raise UsageError(f"{kind} {_name(doc)} spec.replicas: must be a non-negative integer")
                pods.extend(Pod.from_manifest(_from_template(doc, i)) for i in range(count))
            else:
                raise UsageError(
                    f"{path}: {kind} {_name(doc)}: unknown kind {kind!r}, expected Pod or one of "
                    f"{', '.join(WORKLOAD_KINDS)}"
                )
        except PodError as err:
            raise UsageError(str(err) if kind == "Pod" else f"{kind} {_name(doc)} (template): {err}") from err
    return pods


def load_daemonsets(path: str) -> list[Pod]:
    daemons = []
    for _, doc in _documents(path):
        if doc.get("kind") != "DaemonSet":
            raise UsageError(f"{path}: {doc.get('kind')} {_name(doc)}: expected kind DaemonSet")
        manifest = _from_template(doc, 0)
        try:
            daemons.append(Pod.from_manifest(manifest))
        except PodError as err:
            raise UsageError(f"DaemonSet {_name(doc)} (template): {err}") from err
    return daemons


def load_provisioners(paths: list[str]) -> list[Provisioner]:
    from marshmallow import ValidationError

    if not paths:
        return [default_provisioner()]
    provisioners = []
    for path in paths:
        for _, doc in _documents(path):
            try:
                provisioners.append(load_provisioner(doc))
            except ValidationError as err:
                raise UsageError(
                    f"Provisioner {_name(doc).split('/')[-1]} in {path}: {err.messages}"
                ) from err
    return provisioners


def _json_file(path: str, key: str) -> list[dict[str, Any]]:
    try:
        with open(path, encoding="utf-8") as handle:
            obj = json.load(handle)
    except OSError as err:
        raise UsageError(f"reading {path}: {err.strerror}") from err
    except json.JSONDecodeError as err:
        raise UsageError(f"{path}: not JSON: {err}") from err
    items = obj.get(key) if isinstance(obj, Mapping) else None
    if not isinstance(items, list):
        raise UsageError(f"{path}: expected an object with a {key} list")
    return items


def _from_ec2() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Ask the configured EC2 endpoint (KARPY_AWS_ENDPOINT_URL / settings) for types and offerings."""
    try:
        from extender.cloud.aws import instancetypes
    except ModuleNotFoundError as err:
        raise UsageError(
            "--instance-types is required: extender.cloud.aws.instancetypes is not available"
        ) from err
    import boto3

    from extender.settings import from_env

    settings = from_env()
    ec2 = boto3.client("ec2", region_name=settings.aws.region, endpoint_url=settings.aws.endpoint_url or None)
    return instancetypes.describe_instance_types(ec2), instancetypes.describe_offerings(ec2)


def render_json(plan: Plan, elapsed: float) -> dict[str, Any]:
    return {
        "nodes": [
            {
                "provisioner": node.provisioner,
                "instanceType": node.instance_type.name,
                "options": [t.name for t in node.options],
                "zone": node.zone,
                "capacityType": node.capacity_type,
                "pricePerHour": round(node.price, 6),
                "pods": [p.key for p in node.pods],
            }
            for node in plan.nodes
        ],
        "existing": {name: [p.key for p in pods] for name, pods in plan.existing.items()},
        "unschedulable": [{"pod": u.pod.key, "reason": u.reason} for u in plan.unschedulable],
        "totalPricePerHour": round(plan.total_price, 6),
        "lowerBoundPricePerHour": round(plan.lower_bound, 6),
        "notes": list(plan.notes),
        "elapsedSeconds": round(elapsed, 6),
    }


def render_table(plan: Plan, elapsed: float) -> str:
    rows = [("NODE", "PROVISIONER", "TYPE", "ZONE", "CAPACITY", "$/H", "PODS", "OPTIONS")]
    for i, node in enumerate(plan.nodes):
        rows.append(
            (
                f"planned-{i}",
                node.provisioner,
                node.instance_type.name,
                node.zone,
                node.capacity_type,
                f"{node.price:.4f}",
                str(len(node.pods)),
                str(len(node.options)),
            )
        )
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    return "\n".join([*plan.describe(), "", *lines, "", f"Computed in {elapsed:.3f}s"])


def run(args: argparse.Namespace) -> int:
    zones = [z.strip() for z in args.zones.split(",") if z.strip()]
    pods = load_pods(args.pods)
    provisioners = load_provisioners(args.provisioner)
    daemonsets = load_daemonsets(args.daemonsets) if args.daemonsets else []
    if args.instance_types:
        types = _json_file(args.instance_types, "InstanceTypes")
        offerings = _json_file(args.offerings, "InstanceTypeOfferings") if args.offerings else None
    else:
        types, offerings = _from_ec2()
    try:
        prices = PriceBook.from_file(args.prices) if args.prices else PriceBook()
        catalog = build_catalog(types, offerings=offerings, zones=zones, prices=prices)
    except (OSError, ValueError, CatalogError) as err:
        raise UsageError(str(err)) from err
    started = time.perf_counter()
    plan = solve(pods, provisioners, catalog, daemonsets=daemonsets, sort_key=args.sort_key)
    elapsed = time.perf_counter() - started
    if args.output == "json":
        print(json.dumps(render_json(plan, elapsed), indent=2))
    else:
        print(render_table(plan, elapsed))
    return 0
