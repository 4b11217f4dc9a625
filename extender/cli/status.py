"""`karpy status`: the Provisioners, the nodes karpy launched (type, zone, capacity type, age, $/h)
and the pods still waiting for a node, read from the API server.

Prices come from the price file (--prices or KARPY_AWS_PRICE_FILE) when it lists the type, else from
the documented estimate in extender.scheduling.pricing; the SOURCE column says which.
`summarize` and `render` are pure (API JSON in, text out); only `run` talks to the cluster.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from extender.api import labels as wk
from extender.api.quantity import QuantityError, format_cpu, format_memory, parse_quantity
from extender.cli.main import UsageError
from extender.scheduling.pricing import PriceBook, Shape

GIB = 1024.0**3


@dataclass(frozen=True)
class ProvisionerRow:
    name: str
    weight: int
    ttl_seconds_after_empty: int | None
    capacity_types: tuple[str, ...]
    nodes: int
    cpu: str
    memory: str


@dataclass(frozen=True)
class NodeRow:
    name: str
    provisioner: str
    instance_type: str
    zone: str
    capacity_type: str
    age_seconds: float
    ready: bool
    cordoned: bool
    pods: int
    price: float
    price_source: str


@dataclass(frozen=True)
class PendingRow:
    pod: str
    age_seconds: float
    reason: str
    cpu: str
    memory: str


@dataclass(frozen=True)
class Status:
    provisioners: tuple[ProvisionerRow, ...]
    nodes: tuple[NodeRow, ...]
    pending: tuple[PendingRow, ...]

    @property
    def price_per_hour(self) -> float:
        return sum(node.price for node in self.nodes)


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _created(obj: Mapping[str, Any]) -> float | None:
    stamp = _meta(obj).get("creationTimestamp")
    if not stamp:
        return None
    return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()


def _age(obj: Mapping[str, Any], now: float) -> float:
    created = _created(obj)
    return max(0.0, now - created) if created is not None else 0.0


def _quantity(raw: Any) -> float:
    try:
        return parse_quantity(raw) if raw is not None else 0.0
    except QuantityError:
        return 0.0


def _condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind:
            return condition
    return {}


def _capacity_types(spec: Mapping[str, Any]) -> tuple[str, ...]:
    label = (spec.get("labels") or {}).get(wk.CAPACITY_TYPE)
    if label:
        return (label,)
    for req in spec.get("requirements") or []:
        if wk.normalize_key(req.get("key", "")) == wk.CAPACITY_TYPE and req.get("operator") == "In":
            return tuple(req.get("values") or ())
    return ()


def _v1_shape(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A NodePool's spec in the v1alpha5 shape these rows read (labels, requirements, empty TTL)."""
    from extender.api.nodepool import duration_seconds

    spec = obj.get("spec") or {}
    template = spec.get("template") or {}
    disruption = spec.get("disruption") or {}
    ttl = None
    if disruption.get("consolidationPolicy") == "WhenEmpty":
        try:
            ttl = duration_seconds(str(disruption.get("consolidateAfter", "")))
        except ValueError:
            ttl = None
    return {
        "weight": spec.get("weight"),
        "labels": (template.get("metadata") or {}).get("labels"),
        "requirements": (template.get("spec") or {}).get("requirements"),
        "ttlSecondsAfterEmpty": ttl,
    }


def provisioner_row(obj: Mapping[str, Any], nodes: Sequence[NodeRow]) -> ProvisionerRow:
    """One Provisioner's row, or a NodePool's (read in the same shape)."""
    spec = _v1_shape(obj) if obj.get("kind") == "NodePool" else obj.get("spec") or {}
    name = _meta(obj).get("name", "")
    resources = (obj.get("status") or {}).get("resources") or {}
    return ProvisionerRow(
        name=name,
        weight=int(spec.get("weight") or 0),
        ttl_seconds_after_empty=spec.get("ttlSecondsAfterEmpty"),
        capacity_types=_capacity_types(spec),
        nodes=sum(1 for node in nodes if node.provisioner == name),
        cpu=str(resources.get("cpu", "-")),
        memory=str(resources.get("memory", "-")),
    )


def node_row(node: Mapping[str, Any], pods: int, prices: PriceBook, now: float) -> NodeRow:
    labels = _meta(node).get("labels") or {}
    capacity = (node.get("status") or {}).get("capacity") or {}
    instance_type = labels.get(wk.INSTANCE_TYPE, "")
    capacity_type = (
        labels.get(wk.CAPACITY_TYPE) or labels.get(wk.CAPACITY_TYPE_ALIAS) or wk.CAPACITY_TYPE_ON_DEMAND
    )
    zone = labels.get(wk.ZONE, "")
    shape = Shape(
        cpu=_quantity(capacity.get("cpu")),
        memory_gib=_quantity(capacity.get("memory")) / GIB,
        arch=labels.get(wk.ARCH, "amd64"),
        gpus=_quantity(capacity.get("nvidia.com/gpu")) + _quantity(capacity.get("amd.com/gpu")),
        neurons=_quantity(capacity.get("aws.amazon.com/neuron")),
    )
    price = prices.price(instance_type, capacity_type, shape, zone)
    return NodeRow(
        name=_meta(node).get("name", ""),
        provisioner=wk.owner_of(labels) or "",
        instance_type=instance_type,
        zone=zone,
        capacity_type=capacity_type,
        age_seconds=_age(node, now),
        ready=_condition(node, "Ready").get("status") == "True",
        cordoned=bool((node.get("spec") or {}).get("unschedulable")),
        pods=pods,
        price=price.value,
        price_source=price.source,
    )


def _requests(pod: Mapping[str, Any]) -> tuple[float, float]:
    cpu = memory = 0.0
    for container in (pod.get("spec") or {}).get("containers") or []:
        requests = (container.get("resources") or {}).get("requests") or {}
        cpu += _quantity(requests.get("cpu"))
        memory += _quantity(requests.get("memory"))
    return cpu, memory


def pending_row(pod: Mapping[str, Any], now: float) -> PendingRow:
    meta = _meta(pod)
    scheduled = _condition(pod, "PodScheduled")
    cpu, memory = _requests(pod)
    return PendingRow(
        pod=f"{meta.get('namespace', '')}/{meta.get('name', '')}",
        age_seconds=_age(pod, now),
        reason=scheduled.get("reason") or ("Scheduled" if scheduled.get("status") == "True" else "Pending"),
        cpu=format_cpu(cpu),
        memory=format_memory(memory),
    )


def summarize(
    provisioners: Iterable[Mapping[str, Any]],
    nodes: Iterable[Mapping[str, Any]],
    pending: Iterable[Mapping[str, Any]],
    assigned: Iterable[Mapping[str, Any]],
    *,
    prices: PriceBook,
    now: float,
) -> Status:
    """Rows from API JSON: Provisioner objects, karpy's Nodes, unbound pods and bound pods."""
    per_node: dict[str, int] = {}
    for pod in assigned:
        node_name = (pod.get("spec") or {}).get("nodeName")
        if node_name:
            per_node[node_name] = per_node.get(node_name, 0) + 1
    node_rows = tuple(
        sorted(
            (node_row(n, per_node.get(_meta(n).get("name", ""), 0), prices, now) for n in nodes),
            key=lambda row: (row.provisioner, -row.age_seconds, row.name),
        )
    )
    return Status(
        provisioners=tuple(
            sorted((provisioner_row(p, node_rows) for p in provisioners), key=lambda r: r.name)
        ),
        nodes=node_rows,
        pending=tuple(sorted((pending_row(p, now) for p in pending), key=lambda r: (-r.age_seconds, r.pod))),
    )


def human_age(seconds: float) -> str:
    """Like kubectl: the largest unit with at least two of it (90s, 12m, 5h, 3d)."""
    seconds = int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= 2 * size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=False)]
    return [
        "  ".join(str(cell).ljust(w) for cell, w in zip(line, widths, strict=False)).rstrip()
        for line in (headers, *rows)
    ]


def render(status: Status) -> str:
    out = [f"PROVISIONERS ({len(status.provisioners)})"]
    out += _table(
        ("NAME", "WEIGHT", "CAPACITY-TYPES", "TTL-EMPTY", "NODES", "CPU", "MEMORY"),
        [
            (
                p.name,
                str(p.weight),
                ",".join(p.capacity_types) or "-",
                "-" if p.ttl_seconds_after_empty is None else f"{p.ttl_seconds_after_empty}s",
                str(p.nodes),
                p.cpu,
                p.memory,
            )
            for p in status.provisioners
        ],
    )
    out += ["", f"NODES ({len(status.nodes)}, ${status.price_per_hour:.4f}/h)"]
    out += _table(
        ("NAME", "PROVISIONER", "TYPE", "ZONE", "CAPACITY", "AGE", "STATUS", "PODS", "$/H", "PRICE-SOURCE"),
        [
            (
                n.name,
                n.provisioner,
                n.instance_type,
                n.zone,
                n.capacity_type,
                human_age(n.age_seconds),
                ("Ready" if n.ready else "NotReady") + (",Cordoned" if n.cordoned else ""),
                str(n.pods),
                f"{n.price:.4f}",
                n.price_source,
            )
            for n in status.nodes
        ],
    )
    out += ["", f"PENDING PODS ({len(status.pending)})"]
    out += _table(
        ("POD", "AGE", "REASON", "CPU", "MEMORY"),
        [(p.pod, human_age(p.age_seconds), p.reason, p.cpu, p.memory) for p in status.pending],
    )
    return "\n".join(out)


def as_json(status: Status) -> str:
    return json.dumps(
        {**dataclasses.asdict(status), "pricePerHour": round(status.price_per_hour, 6)}, indent=2
    )


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "status", help="show Provisioners, karpy's nodes with their $/h, and pending pods"
    )
    parser.add_argument(
        "--kubeconfig",
        default=None,
        help="kubeconfig (env KARPY_KUBECONFIG; default in-cluster, then ~/.kube/config)",
    )
    parser.add_argument(
        "--prices",
        default=None,
        help='{"onDemand": {...}, "spot": {...}} price file '
        "(env KARPY_AWS_PRICE_FILE; default: the documented estimate)",
    )
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table")
    parser.set_defaults(func=run)


def _price_book(path: str) -> PriceBook:
    if not path:
        return PriceBook()
    try:
        return PriceBook.from_file(path)
    except OSError as err:
        raise UsageError(f"reading {path}: {err.strerror}") from err
    except ValueError as err:
        raise UsageError(str(err)) from err


def run(args: argparse.Namespace) -> int:
    from kubernetes import client

    from extender.api.nodepool import API_VERSION as NODEPOOL_API_VERSION
    from extender.api.nodepool import PLURAL as NODEPOOL_PLURAL
    from extender.cluster import client as kube_client
    from extender.cluster import nodes, pods
    from extender.cluster.provisioners import list_custom
    from extender.settings import from_env

    settings = from_env()
    if args.kubeconfig is not None:
        settings.kubeconfig = args.kubeconfig
    prices = _price_book(args.prices if args.prices is not None else settings.aws.price_file)
    with kube_client.load(settings) as kube:
        group, version = wk.API_VERSION.split("/")
        provisioners = (
            kube_client.call_json(
                client.CustomObjectsApi(kube).list_cluster_custom_object, group, version, "provisioners"
            ).get("items")
            or []
        )
        # NodePools beside them (none when the v1 CRD is not installed).
        group, version = NODEPOOL_API_VERSION.split("/")
        provisioners += [
            {**pool, "kind": "NodePool"} for pool in list_custom(kube, group, version, NODEPOOL_PLURAL)
        ]
        status = summarize(
            provisioners,
            nodes.list_node_manifests(kube, karpy_only=True),
            pods.list_pending(kube)[0],
            pods.list_assigned(kube),
            prices=prices,
            now=time.time(),
        )
    print(as_json(status) if args.output == "json" else render(status))
    return 0
