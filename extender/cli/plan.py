"""`karpy plan`: dry-run the scheduling core on YAML/JSON files and print the plan (table or JSON).

Reads pods (Pods, or Deployments/ReplicaSets/StatefulSets/Jobs expanded into replicas), Provisioners
(with the controller's defaults), an EC2 DescribeInstanceTypes response (or asks the configured EC2
endpoint), optional offerings, prices, DaemonSets and the cluster's existing Nodes with their pods,
Namespaces and CSINodes; PersistentVolumeClaims, PersistentVolumes and StorageClasses in either file
resolve the pods' claims as the controller resolves them (`extender.cluster.volumes.parse_pod`);
calls extender.scheduling.solver.solve. A pod karpy cannot parse or does not model is reported
under `unschedulable` and the rest is planned; unusable input otherwise raises UsageError (exit 2).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from extender.api import labels as wk
from extender.api.pod import Pod, PodError
from extender.api.provisioner import Overlay, Provisioner
from extender.api.resources import Resources
from extender.cli.main import UsageError
from extender.cluster.volumes import Volumes, parse_pod
from extender.scheduling.catalog import CatalogError, build_catalog
from extender.scheduling.instancetypes import InstanceType
from extender.scheduling.overlays import resolve
from extender.scheduling.plan import ExistingNode
from extender.scheduling.poddensity import PodDensity
from extender.scheduling.pricing import PriceBook
from extender.scheduling.solver import SORT_KEYS, Plan, solve
from extender.settings import Settings

DEFAULT_ZONES = "us-west-2a,us-west-2b,us-west-2c"
WORKLOAD_KINDS = ("Deployment", "ReplicaSet", "StatefulSet", "Job")
#: Objects the pods' claims resolve against, read from the pods and the existing file alike.
VOLUME_KINDS = ("PersistentVolumeClaim", "PersistentVolume", "StorageClass")
#: Stands in for an instance profile when none is configured: a plan launches nothing.
PLAN_INSTANCE_PROFILE = "karpy-plan-launches-nothing"
#: Nodes `--existing` counts as karpy's (karpy may place pods on them); any other node only brings
#: its topology domains and pods.
KARPY_NODE_LABELS = (wk.MANAGED_BY_LABEL, *wk.OWNER_LABELS)
#: Most pods one plan expands to (replicas included): 3x the 50,000 pods karpy is measured at.
#: More is a typo (`replicas: 100000000`) that would otherwise expand for minutes and exhaust memory.
MAX_PODS = 150_000


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("plan", help="compute which nodes karpy would launch for some pods (dry run)")
    parser.add_argument(
        "--pods",
        required=True,
        help="YAML stream of Pods / Deployments / ReplicaSets / StatefulSets / Jobs, and the "
        "PersistentVolumeClaims, PersistentVolumes and StorageClasses their claims use",
    )
    parser.add_argument(
        "--provisioner",
        action="append",
        default=[],
        help="Provisioner or NodePool YAML, with their AWSNodeTemplates or EC2NodeClasses, and NodeOverlays"
        " (repeatable)",
    )
    parser.add_argument("--instance-types", help="DescribeInstanceTypes JSON; default: ask the EC2 endpoint")
    parser.add_argument("--offerings", help="DescribeInstanceTypeOfferings JSON")
    parser.add_argument(
        "--zones", default=DEFAULT_ZONES, help=f"comma-separated zones (default {DEFAULT_ZONES})"
    )
    parser.add_argument("--prices", help='{"onDemand": {...}, "spot": {...}} price file')
    parser.add_argument("--daemonsets", help="YAML stream of DaemonSets whose pods land on every node")
    parser.add_argument(
        "--capacity-reservations",
        help="capacity reservations the EC2NodeClasses' capacityReservationSelectorTerms select from, "
        "in the KARPY_AWS_CAPACITY_RESERVATIONS file format (default: that variable's file)",
    )
    parser.add_argument(
        "--existing",
        help="the cluster as it is: YAML stream or List of Nodes, the Pods bound to them, Namespaces, "
        "CSINodes, PersistentVolumeClaims, PersistentVolumes and StorageClasses (e.g. kubectl get "
        "nodes,pods,namespaces,csinodes,pvc,pv,storageclasses -A -o yaml); pods go onto karpy's nodes "
        f"({' or '.join(KARPY_NODE_LABELS)}) first",
    )
    parser.add_argument(
        "--consolidate",
        action="store_true",
        help="print the consolidation actions karpy would take on --existing (taking none)",
    )
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
        if (where := _not_finite(doc)) is not None:
            raise UsageError(f"{path} document {index}: {where}: not a finite number")
        if doc.get("kind") == "List":
            for item in doc.get("items") or []:
                yield index, item
        else:
            yield index, doc


def _not_finite(doc: Any) -> str | None:
    """The path of the first NaN or infinity in a YAML document (`.nan`, `.inf`), else None.
    Such a quantity would compare False with everything and slip past every fit check."""
    stack: list[tuple[Any, str]] = [(doc, "")]
    while stack:
        value, path = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return path.lstrip(".") or "document"
        if isinstance(value, Mapping):
            stack.extend((v, f"{path}.{k}") for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(value))
    return None


def _name(doc: Mapping[str, Any]) -> str:
    meta = doc.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name') or '<unnamed>'}"


def _from_template(owner: Mapping[str, Any], index: int) -> dict[str, Any]:
    """A Pod manifest for replica `index` of a workload's pod template."""
    kind = owner.get("kind")
    meta = owner.get("metadata") or {}
    template = (owner.get("spec") or {}).get("template") or {}
    template_meta = template.get("metadata") or {}
    spec = template.get("spec") or {}
    if kind == "StatefulSet" and (claims := _claim_templates(owner)):
        # The StatefulSet controller gives replica i the claim <template>-<set>-<i> of each
        # volumeClaimTemplate, as the volume named after the template.
        names = {_claim_name(t) for t in claims}
        volumes = [
            v for v in spec.get("volumes") or () if not (isinstance(v, Mapping) and v.get("name") in names)
        ]
        volumes += [
            {"name": name, "persistentVolumeClaim": {"claimName": f"{name}-{meta.get('name')}-{index}"}}
            for name in sorted(names)
        ]
        spec = {**spec, "volumes": volumes}
    return {
        "kind": "Pod",
        "metadata": {
            "name": f"{meta.get('name')}-{index}",
            "namespace": meta.get("namespace") or "default",
            "labels": template_meta.get("labels") or {},
            "annotations": template_meta.get("annotations") or {},
            "ownerReferences": [{"kind": kind, "name": meta.get("name"), "controller": True}],
        },
        "spec": spec,
    }


def _claim_templates(owner: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    templates = (owner.get("spec") or {}).get("volumeClaimTemplates") or ()
    return [t for t in templates if isinstance(t, Mapping) and _claim_name(t)]


def _claim_name(template: Mapping[str, Any]) -> str:
    return str((template.get("metadata") or {}).get("name") or "")


def _add_implied_claims(owner: Mapping[str, Any], count: int, volumes: Volumes) -> None:
    """The claims a StatefulSet's controller would create for `count` replicas, unless given."""
    meta = owner.get("metadata") or {}
    namespace = meta.get("namespace") or "default"
    for template in _claim_templates(owner):
        for index in range(count):
            name = f"{_claim_name(template)}-{meta.get('name')}-{index}"
            volumes.claims.setdefault(
                f"{namespace}/{name}",
                {"metadata": {"name": name, "namespace": namespace}, "spec": template.get("spec") or {}},
            )


def load_volumes(docs: Iterable[Mapping[str, Any]]) -> Volumes:
    """The PersistentVolumeClaims, PersistentVolumes and StorageClasses among `docs`, keyed as the
    controller keys them (claims by namespace/name)."""
    volumes = Volumes()
    for doc in docs:
        kind = doc.get("kind")
        meta = doc.get("metadata") or {}
        name = str(meta.get("name") or "")
        if kind == "PersistentVolumeClaim":
            volumes.claims[f"{meta.get('namespace') or 'default'}/{name}"] = doc
        elif kind == "PersistentVolume":
            volumes.volumes[name] = doc
        elif kind == "StorageClass":
            volumes.classes[name] = doc
    return volumes


@dataclass
class Pods:
    """The pods to plan, and those karpy cannot read: pod key -> why."""

    pods: list[Pod] = field(default_factory=list)
    rejected: dict[str, str] = field(default_factory=dict)
    #: Pods whose claims cannot be placed yet: pod key -> why (the controller's UnmodelledRule).
    unresolved: dict[str, str] = field(default_factory=dict)


def load_pods(
    path: str, docs: Sequence[Mapping[str, Any]] | None = None, volumes: Volumes | None = None
) -> Pods:
    """The pods of `path` (or of its already read `docs`), their claims resolved against `volumes`
    (default: the volume objects of the same file)."""
    docs = [doc for _, doc in _documents(path)] if docs is None else docs
    volumes = volumes if volumes is not None else load_volumes(docs)
    result = Pods()
    total = 0
    expanded: list[tuple[str, Mapping[str, Any], list[Mapping[str, Any]]]] = []
    for doc in docs:
        kind = doc.get("kind", "Pod")
        if kind in VOLUME_KINDS:
            continue
        manifests: list[Mapping[str, Any]]
        if kind == "Pod":
            manifests = [doc]
        elif kind in WORKLOAD_KINDS:
            spec = doc.get("spec") or {}
            field_name = "parallelism" if kind == "Job" else "replicas"
            count = spec.get(field_name, 1)
            if not isinstance(count, int) or isinstance(count, bool) or count < 0:
                raise UsageError(f"{kind} {_name(doc)} spec.{field_name}: must be a non-negative integer")
            if total + count > MAX_PODS:
                raise UsageError(
                    f"{kind} {_name(doc)} spec.{field_name}: {count} would plan more than {MAX_PODS} pods"
                )
            manifests = [_from_template(doc, i) for i in range(count)]
            if kind == "StatefulSet":
                _add_implied_claims(doc, count, volumes)
        else:
            raise UsageError(
                f"{path}: {kind} {_name(doc)}: unknown kind {kind!r}, expected Pod or one of "
                f"{', '.join((*WORKLOAD_KINDS, *VOLUME_KINDS))}"
            )
        total += len(manifests)
        if total > MAX_PODS:
            raise UsageError(f"{path}: more than {MAX_PODS} pods to plan")
        expanded.append((kind, doc, manifests))
    # Parsed once every document is read: a claim may come after the pods that use it.
    for kind, doc, manifests in expanded:
        for manifest in manifests:
            try:
                pod, unresolved = parse_pod(manifest, volumes)
            except PodError as err:
                where = "" if kind == "Pod" else f"{kind} {_name(doc)} (template): "
                result.rejected[_name(manifest)] = f"{where}{err}"
                continue
            if unresolved:
                result.unresolved[pod.key] = f"not provisioning for this pod, {'; '.join(unresolved)}"
            else:
                result.pods.append(pod)
    return result


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


def plan_settings() -> Settings:
    """The controller's settings from KARPY_* (cluster name, default instance profile, endpoint)."""
    from extender.settings import from_env

    settings = from_env()
    if settings.aws.default_instance_profile:
        return settings
    aws = dataclasses.replace(settings.aws, default_instance_profile=PLAN_INSTANCE_PROFILE)
    return dataclasses.replace(settings, aws=aws)


def load_provisioners(paths: list[str], settings: Settings | None = None) -> list[Provisioner]:
    """The Provisioners with the defaults the controller applies (`provisioners.load_configured`);
    none given: one named `default` with no spec, defaulted the same way."""
    from marshmallow import ValidationError

    from extender.cluster.pool_resources import load_configured

    settings = settings or plan_settings()
    if not paths:
        return [load_configured({"metadata": {"name": "default"}, "spec": {}}, settings)]
    docs = [(path, doc) for path in paths for _, doc in _documents(path)]
    # AWSNodeTemplates and EC2NodeClasses given beside them resolve providerRefs and nodeClassRefs.
    templates = [doc for _, doc in docs if doc.get("kind") == "AWSNodeTemplate"]
    classes = [doc for _, doc in docs if doc.get("kind") == "EC2NodeClass"]
    provisioners = []
    for path, doc in docs:
        if doc.get("kind") in ("AWSNodeTemplate", "EC2NodeClass", "NodeOverlay"):
            continue
        kind = "NodePool" if doc.get("kind") == "NodePool" else "Provisioner"
        try:
            provisioners.append(load_configured(doc, settings, templates, classes))
        except ValidationError as err:
            raise UsageError(f"{kind} {_name(doc).split('/')[-1]} in {path}: {err.messages}") from err
    names = [p.name for p in provisioners]
    if clash := sorted({n for n in names if names.count(n) > 1}):
        raise UsageError(f"{', '.join(clash)}: a Provisioner and a NodePool may not share a name")
    return provisioners


def with_capacity_reservations(
    catalog: list[InstanceType], provisioners: list[Provisioner], path: str
) -> tuple[list[InstanceType], list[Provisioner]]:
    """The catalog with the reserved offerings of the declared reservations each pool's EC2NodeClass
    selects, as the controller's fallback source resolves them (no file: unchanged)."""
    from datetime import UTC, datetime

    from extender.api.capacity_reservations import selected
    from extender.cloud.aws.capacityreservations import load_declared
    from extender.cloud.types import CloudError
    from extender.scheduling import reservations

    if not path:
        return catalog, provisioners
    try:
        declared = load_declared(path)
    except CloudError as err:
        raise UsageError(str(err)) from err
    now = datetime.now(UTC)
    found = {
        pool.name: [
            dataclasses.replace(r, state=r.state_at(now))
            for r in selected(declared, pool.provider.capacity_reservation_selector, now)
        ]
        for pool in provisioners
        if pool.provider.capacity_reservation_selector
    }
    return reservations.attach(catalog, provisioners, found)


def load_overlays(paths: list[str]) -> list[Overlay]:
    """The NodeOverlays among the --provisioner files, loaded as the controller loads them."""
    from marshmallow import ValidationError

    from extender.api.nodeoverlay import load_nodeoverlay

    overlays = []
    for path in paths:
        for _, doc in _documents(path):
            if doc.get("kind") != "NodeOverlay":
                continue
            try:
                overlays.append(load_nodeoverlay(doc))
            except ValidationError as err:
                raise UsageError(
                    f"NodeOverlay {_name(doc).split('/')[-1]} in {path}: {err.messages}"
                ) from err
    return overlays


def with_overlays(
    provisioners: list[Provisioner], overlays: list[Overlay], catalog: Sequence[InstanceType]
) -> list[Provisioner]:
    """The pools with the overlays that apply to them; conflicts are said on stderr, as the
    controller's status would say them."""
    if not overlays:
        return provisioners
    resolution = resolve(overlays, provisioners, catalog)
    for name in resolution.conflicts:
        print(f"NodeOverlay {name}: conflict with another overlay, not applied", file=sys.stderr)
    return list(resolution.provisioners)


@dataclass
class Existing:
    nodes: list[ExistingNode] = field(default_factory=list)
    #: Provisioner -> capacity of its nodes (limits), as the controller counts it.
    usage: dict[str, Resources] = field(default_factory=dict)
    #: Namespace -> labels; None when the file has no Namespace.
    namespaces: dict[str, dict[str, str]] | None = None


def is_karpy_node(labels: Mapping[str, str]) -> bool:
    """A node karpy launched (and may pack onto), by its labels."""
    return any(key in labels for key in KARPY_NODE_LABELS)


def load_existing(
    path: str, docs: Sequence[Mapping[str, Any]] | None = None, volumes: Volumes | None = None
) -> Existing:
    """Nodes (karpy's take pods unless cordoned or deleting), the non-terminal Pods bound to them,
    Namespaces, and CSINodes (each node's attach limits, counted against the unique CSI volumes its
    pods hold, their claims looked up in `volumes`); other kinds and unbound pods are left out."""
    from extender.api.node import Node
    from extender.cluster import csinodes, inventory
    from extender.cluster.namespaces import labels_by_name

    docs = [doc for _, doc in _documents(path)] if docs is None else docs
    volumes = volumes if volumes is not None else load_volumes(docs)
    nodes: list[Node] = []
    bound: dict[str, list[Mapping[str, Any]]] = {}
    namespaces: dict[str, dict[str, str]] | None = None
    limits = csinodes.limits_by_node(doc for doc in docs if doc.get("kind") == "CSINode")
    for doc in docs:
        kind = doc.get("kind")
        if kind == "Node":
            nodes.append(Node.from_manifest(doc))
        elif kind == "Pod":
            # Terminal ones are left out by node_pods.
            if node := (doc.get("spec") or {}).get("nodeName"):
                bound.setdefault(node, []).append(doc)
        elif kind == "Namespace":
            namespaces = namespaces if namespaces is not None else {}
            namespaces.update(labels_by_name([doc]))
    result = Existing(usage=inventory.usage(nodes), namespaces=namespaces)
    for node in nodes:
        pods = inventory.node_pods(bound.get(node.name, []))
        takes_pods = is_karpy_node(node.labels) and not node.unschedulable and not node.deleting
        attach = (limits[node.name], volumes.in_use(pods.pods)) if node.name in limits else None
        result.nodes.append(inventory.existing_node(node, pods, schedulable=takes_pods, volumes=attach))
    return result


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


def unschedulable(
    plan: Plan, rejected: Mapping[str, str], unresolved: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """Pods karpy could not read (`invalid`), those whose claims cannot be placed yet (`unmodelled`),
    then the solver's (`unmodelled`: a rule karpy does not model; neither: nothing karpy may launch
    or use fits)."""
    return [
        *(
            {"pod": key, "reason": reason, "invalid": True, "unmodelled": False}
            for key, reason in rejected.items()
        ),
        *(
            {"pod": key, "reason": reason, "invalid": False, "unmodelled": True}
            for key, reason in (unresolved or {}).items()
        ),
        *(
            {"pod": u.pod.key, "reason": u.reason, "invalid": False, "unmodelled": u.unmodelled}
            for u in plan.unschedulable
        ),
    ]


def render_json(plan: Plan, elapsed: float, loaded: Pods | None = None) -> dict[str, Any]:
    loaded = loaded or Pods()
    placed = plan.placed()
    return {
        "nodes": [
            {
                "provisioner": node.provisioner,
                "instanceType": node.instance_type.name,
                "options": [t.name for t in node.options],
                "zone": node.zone,
                "capacityType": node.capacity_type,
                **({"capacityReservationId": node.reservation_id} if node.reservation_id else {}),
                "pricePerHour": round(node.price, 6),
                "pods": [p.key for p in node.pods],
                "labels": dict(sorted(node.node_labels().items())),
            }
            for node in plan.nodes
        ],
        "existing": {name: [p.key for p in pods] for name, pods in plan.existing.items()},
        "boundByScheduler": [
            {"pod": key, "node": placed[key], "notEvaluated": list(rules)}
            for key, rules in plan.left_to_scheduler().items()
        ],
        "unschedulable": unschedulable(plan, loaded.rejected, loaded.unresolved),
        "totalPricePerHour": round(plan.total_price, 6),
        "lowerBoundPricePerHour": round(plan.lower_bound, 6),
        "notes": list(plan.notes),
        "elapsedSeconds": round(elapsed, 6),
    }


def render_table(
    plan: Plan, elapsed: float, loaded: Pods | None = None, existing: Sequence[ExistingNode] = ()
) -> str:
    loaded = loaded or Pods()
    rows = [("NODE", "PROVISIONER", "TYPE", "ZONE", "CAPACITY", "$/H", "PODS", "OPTIONS")]
    known = {n.name: n for n in existing}
    for name, pods in plan.existing.items():
        found = known.get(name)
        labels = found.labels if found else {}
        rows.append(
            (
                name,
                found.provisioner if found else "",
                labels.get(wk.INSTANCE_TYPE, "") or "-",
                labels.get(wk.ZONE, "") or "-",
                labels.get(wk.CAPACITY_TYPE, "") or "-",
                "-",
                f"+{len(pods)}",
                "existing",
            )
        )
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
    unread = [
        f"Unable to schedule pod {key}, {reason}"
        for key, reason in [*loaded.rejected.items(), *loaded.unresolved.items()]
    ]
    described = [*scheduler_bound_lines(plan), *type_label_lines(plan)]
    return "\n".join([*unread, *plan.describe(), "", *lines, *described, "", f"Computed in {elapsed:.3f}s"])


def scheduler_bound_lines(plan: Plan) -> list[str]:
    """The placed pods kube-scheduler binds, apart from those karpy binds: pod, node, why."""
    placed = plan.placed()
    rows = [("POD", "NODE", "LEFT TO KUBE-SCHEDULER")]
    rows += [(key, placed[key], "; ".join(rules)) for key, rules in plan.left_to_scheduler().items()]
    if len(rows) == 1:
        return []
    widths = [max(len(r[c]) for r in rows) for c in range(2)]
    lines = [f"{r[0].ljust(widths[0])}  {r[1].ljust(widths[1])}  {r[2]}".rstrip() for r in rows]
    title = "BOUND BY KUBE-SCHEDULER (karpy plans their node and holds their room; kube-scheduler binds them)"
    return ["", title, *lines]


def type_label_lines(plan: Plan) -> list[str]:
    """Each planned node's instance-type labels (karpenter.k8s.aws/*, domain left out), one line each."""
    prefix = wk.AWS_LABEL_DOMAIN + "/"
    lines = []
    for i, node in enumerate(plan.nodes):
        shown = [f"{k[len(prefix) :]}={v}" for k, v in node.node_labels().items() if k.startswith(prefix)]
        if shown:
            lines.append(f"planned-{i} {node.instance_type.name}: {' '.join(sorted(shown))}")
    return ["", "LABELS (karpenter.k8s.aws/)", *lines] if lines else []


def run(args: argparse.Namespace) -> int:
    zones = [z.strip() for z in args.zones.split(",") if z.strip()]
    pod_docs = [doc for _, doc in _documents(args.pods)]
    existing_docs = list(_documents(args.existing)) if args.existing else []
    # Claims resolve against the volume objects of both files, as against the cluster's.
    volumes = load_volumes([*pod_docs, *(doc for _, doc in existing_docs)])
    existing = (
        load_existing(args.existing, [doc for _, doc in existing_docs], volumes)
        if args.existing
        else Existing()
    )
    loaded = load_pods(args.pods, pod_docs, volumes)
    provisioners = load_provisioners(args.provisioner)
    daemonsets = load_daemonsets(args.daemonsets) if args.daemonsets else []
    if args.instance_types:
        types = _json_file(args.instance_types, "InstanceTypes")
        offerings = _json_file(args.offerings, "InstanceTypeOfferings") if args.offerings else None
    else:
        types, offerings = _from_ec2()
    try:
        prices = PriceBook.from_file(args.prices) if args.prices else PriceBook()
        aws = plan_settings().aws
        density = PodDensity(reserved_enis=aws.reserved_enis, prefix_delegation=aws.prefix_delegation)
        catalog = build_catalog(types, offerings=offerings, zones=zones, prices=prices, density=density)
    except (OSError, ValueError, CatalogError) as err:
        raise UsageError(str(err)) from err
    catalog, provisioners = with_capacity_reservations(
        catalog, provisioners, args.capacity_reservations or plan_settings().aws.capacity_reservations
    )
    provisioners = with_overlays(provisioners, load_overlays(args.provisioner), catalog)
    if args.consolidate:
        from extender.cli import consolidation

        return consolidation.run(
            args,
            existing_docs,
            provisioners=provisioners,
            catalog=catalog,
            daemonsets=daemonsets,
            pending=loaded.pods,
        )
    started = time.perf_counter()
    plan = solve(
        loaded.pods,
        provisioners,
        catalog,
        daemonsets=daemonsets,
        existing_nodes=existing.nodes,
        usage=existing.usage,
        sort_key=args.sort_key,
        namespaces=existing.namespaces,
    )
    elapsed = time.perf_counter() - started
    if args.output == "json":
        print(json.dumps(render_json(plan, elapsed, loaded), indent=2))
    else:
        print(render_table(plan, elapsed, loaded, existing.nodes))
    return 0
