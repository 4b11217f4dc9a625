"""`karpy status`: the Provisioners, the nodes karpy launched (type, zone, capacity type, age, $/h)
and the pods still waiting for a node, read from the API server; then the dashboards' figures (pod
startup p50/p95, usage against limits, $/h against the lower bound; extender/cli/figures.py), from
the controller's /metrics with --metrics. `--watch [SECONDS]` redraws them until Ctrl-C.

Prices come from the price file (--prices or KARPY_AWS_PRICE_FILE) when it lists the type, else from
the documented estimate in extender.scheduling.pricing; the SOURCE column says which.
Provisioners and NodePools are read as karpy reads them (`load_pools`, through extender/api with
the defaults `karpy plan` applies): one that does not load is listed as invalid, with why.
`summarize` and `render` are pure (models and API JSON in, text out); only `run` talks to the cluster.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from marshmallow import ValidationError

from extender.api import labels as wk
from extender.api.provisioner import Provisioner
from extender.api.quantity import QuantityError, format_cpu, parse_quantity
from extender.api.schema_text import summarize as summarize_problems
from extender.cli import figures as dash
from extender.cli.main import UsageError
from extender.scheduling.pricing import PriceBook, Shape

GIB = 1024.0**3


@dataclass(frozen=True)
class Pool:
    """A Provisioner or NodePool as karpy reads it (`model`), or `problem`: why it does not load
    (karpy leaves it out); `resources`: its status.resources, what its nodes hold."""

    name: str
    model: Provisioner | None
    problem: str = ""
    resources: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ProvisionerRow:
    name: str
    weight: int
    ttl_seconds_after_empty: int | None
    capacity_types: tuple[str, ...]
    nodes: int
    cpu: str
    memory: str
    #: Why karpy does not load it ("" = it does).
    problem: str = ""


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


def _capacity_types(pool: Provisioner) -> tuple[str, ...]:
    if label := pool.labels.get(wk.CAPACITY_TYPE):
        return (label,)
    for req in pool.requirements:
        if req.key == wk.CAPACITY_TYPE and req.operator == "In":
            return req.values
    return ()


def load_pools(
    objects: Iterable[Mapping[str, Any]], load: Callable[[Mapping[str, Any]], Provisioner]
) -> list[Pool]:
    """Provisioner and NodePool manifests as `load` (extender/api behind it) reads them."""
    pools = []
    for obj in objects:
        name = str(_meta(obj).get("name", ""))
        resources = (obj.get("status") or {}).get("resources") or {}
        try:
            pools.append(Pool(name, load(obj), resources=resources))
        except ValidationError as err:
            messages = err.messages if isinstance(err.messages, list) else [str(err.messages)]
            pools.append(Pool(name, None, summarize_problems(messages), resources))
        except Exception as err:  # one object's boundary, as the controller's listing has it
            pools.append(Pool(name, None, f"{type(err).__name__}: {err}", resources))
    return pools


def provisioner_row(pool: Pool, nodes: Sequence[NodeRow]) -> ProvisionerRow:
    """One Provisioner's or NodePool's row."""
    model, resources = pool.model, pool.resources
    return ProvisionerRow(
        name=pool.name,
        weight=model.weight if model else 0,
        ttl_seconds_after_empty=model.ttl_seconds_after_empty if model else None,
        capacity_types=_capacity_types(model) if model else (),
        nodes=sum(1 for node in nodes if node.provisioner == pool.name),
        cpu=str(resources.get("cpu", "-")),
        memory=readable_memory(_quantity(resources["memory"])) if "memory" in resources else "-",
        problem=pool.problem,
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


#: The REASON column's longest karpy reason.
REASON_WIDTH = 90


def karpy_reasons(events: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Pod uid -> the first pool's reason of its FailedProvisioning Event (karpy's, not
    kube-scheduler's Unschedulable), cut at a word to REASON_WIDTH."""
    found: dict[str, str] = {}
    for event in events:
        involved = event.get("involvedObject") or {}
        if event.get("reason") != "FailedProvisioning" or not involved.get("uid"):
            continue
        message = str(event.get("message") or "").split(": ", 1)[-1].split("; ", 1)[0]
        if len(message) > REASON_WIDTH:
            message = message[: REASON_WIDTH - 4].rsplit(" ", 1)[0] + " ..."
        found[involved["uid"]] = message
    return found


def pending_row(pod: Mapping[str, Any], now: float, reasons: Mapping[str, str] | None = None) -> PendingRow:
    meta = _meta(pod)
    scheduled = _condition(pod, "PodScheduled")
    cpu, memory = _requests(pod)
    default = scheduled.get("reason") or ("Scheduled" if scheduled.get("status") == "True" else "Pending")
    return PendingRow(
        pod=f"{meta.get('namespace', '')}/{meta.get('name', '')}",
        age_seconds=_age(pod, now),
        reason=(reasons or {}).get(str(meta.get("uid") or ""), default),
        cpu=format_cpu(cpu),
        memory=readable_memory(memory),
    )


def summarize(
    provisioners: Iterable[Pool],
    nodes: Iterable[Mapping[str, Any]],
    pending: Iterable[Mapping[str, Any]],
    assigned: Iterable[Mapping[str, Any]],
    *,
    prices: PriceBook,
    now: float,
    reasons: Mapping[str, str] | None = None,
) -> Status:
    """Rows from the pools (`load_pools`) and API JSON: karpy's Nodes, unbound pods and bound pods;
    `reasons`: pod uid -> karpy's reason (`karpy_reasons`)."""
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
        pending=tuple(
            sorted((pending_row(p, now, reasons) for p in pending), key=lambda r: (-r.age_seconds, r.pod))
        ),
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
    out += [
        f"{p.name} is invalid, karpy leaves it out: {p.problem}" for p in status.provisioners if p.problem
    ]
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


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}s"


def _amount(resource: str, value: float) -> str:
    return readable_memory(value) if resource == "memory" else f"{value:g}"


def readable_memory(num_bytes: float) -> str:
    """Bytes in the largest binary unit that keeps one digit before the point, one decimal at
    most (15518924Ki reads 14.8Gi), as `kubectl top` and `kubectl describe node` readers expect."""
    for suffix, factor in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if num_bytes >= factor:
            return f"{num_bytes / factor:.1f}".removesuffix(".0") + suffix
    return f"{num_bytes:g}"


def render_figures(figures: dash.Figures) -> str:
    source = "controller metrics" if figures.source == "metrics" else "pods on karpy's nodes now"
    out = [f"POD STARTUP (creation to bound / Ready; {source})"]
    out += _table(
        ("UNTIL", "PODS", "P50", "P95"),
        [(s.until, str(s.pods), _seconds(s.p50), _seconds(s.p95)) for s in figures.startup],
    )
    out += ["", f"LIMITS ({len(figures.limits)})"]
    out += _table(
        ("PROVISIONER", "RESOURCE", "USED", "LIMIT", "USED%"),
        [
            (
                lim.provisioner,
                lim.resource,
                _amount(lim.resource, lim.used),
                _amount(lim.resource, lim.limit),
                "-" if lim.share is None else f"{100 * lim.share:.0f}%",
            )
            for lim in figures.limits
        ],
    )
    cost = f"COST ${figures.price_per_hour:.4f}/h"
    if figures.lower_bound is None or figures.consolidating_cost is None:
        why = (
            "the controller computes it for consolidating Provisioners and NodePools; none here"
            if figures.source == "metrics"
            else figures.unreachable or "from the controller: --metrics"
        )
        cost += f", lower bound - ({why})"
    else:
        cost += (
            f", consolidating Provisioners ${figures.consolidating_cost:.4f}/h against a lower bound of "
            f"${figures.lower_bound:.4f}/h"
        )
        if figures.lower_bound > 0:
            cost += f" ({figures.consolidating_cost / figures.lower_bound:.2f}x)"
    return "\n".join([*out, "", cost])


def as_json(status: Status, figures: dash.Figures | None = None) -> str:
    extra = {"figures": dataclasses.asdict(figures)} if figures is not None else {}
    return json.dumps(
        {**dataclasses.asdict(status), "pricePerHour": round(status.price_per_hour, 6), **extra}, indent=2
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
    parser.add_argument(
        "--metrics",
        default=None,
        help="the controller's /metrics URL: startup, limits and the lower bound as the dashboards show them "
        "(env KARPY_STATUS_METRICS_URL). Without it: the karpy-controller Service's metrics port through "
        "the API server, then a local controller at KARPY_EXTENDER_METRICS_BIND (default 127.0.0.1:8089)",
    )
    parser.add_argument(
        "--watch",
        nargs="?",
        type=float,
        const=WATCH_DEFAULT,
        default=None,
        metavar="SECONDS",
        help=f"redraw every SECONDS ({WATCH_MIN:g}-{WATCH_MAX:g}, default {WATCH_DEFAULT:g}) until Ctrl-C",
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


WATCH_DEFAULT, WATCH_MIN, WATCH_MAX = 5.0, 1.0, 3600.0
CLEAR = "\x1b[H\x1b[2J"


def watch(
    draw: Callable[[], str],
    every: float,
    *,
    out: Callable[[str], None] = print,
    sleep: Callable[[float], None] = time.sleep,
    rounds: int | None = None,
) -> int:
    """Redraw `draw()` every `every` seconds until Ctrl-C (or `rounds` draws); a failed refresh shows
    its error and the next round tries again."""
    if not WATCH_MIN <= every <= WATCH_MAX:
        raise UsageError(f"--watch: SECONDS must be between {WATCH_MIN:g} and {WATCH_MAX:g}, got {every:g}")
    drawn = 0
    try:
        while rounds is None or drawn < rounds:
            try:
                text = draw()
            except (UsageError, KeyboardInterrupt):
                raise
            except Exception as err:  # the API server or the controller away for a moment
                text = f"error: {err}"
            out(f"{CLEAR}{text}\n\n(every {every:g}s, {time.strftime('%H:%M:%S')}; Ctrl-C to stop)")
            drawn += 1
            if rounds is None or drawn < rounds:
                sleep(every)
    except KeyboardInterrupt:
        out("")
    return 0


def _scrape(url: str, timeout: float = 10.0) -> str:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.read().decode()
    except (urllib.error.URLError, OSError, ValueError) as err:
        raise UsageError(f"reading metrics from {url}: {getattr(err, 'reason', err)}") from err


def run(args: argparse.Namespace) -> int:
    import os

    metrics_url = args.metrics if args.metrics is not None else os.environ.get("KARPY_STATUS_METRICS_URL", "")

    def draw() -> str:
        status, figures = collect(args, metrics_url)
        if args.output == "json":
            return as_json(status, figures)
        return render(status) + "\n\n" + render_figures(figures)

    if args.watch is not None:
        return watch(draw, args.watch)
    print(draw())
    return 0


def from_controller(status: Status, metrics: str) -> dash.Figures:
    """The controller's figures, priced as the NODES table is (from the nodes just listed): the
    controller's price gauge lags a node launched since its last status pass, and the COST line
    read $0/h beside a running node."""
    return dataclasses.replace(dash.from_metrics(metrics), price_per_hour=status.price_per_hour)


def collect(args: argparse.Namespace, metrics_url: str) -> tuple[Status, dash.Figures]:
    """One reading of the cluster (and of the controller's metrics when named)."""
    from kubernetes import client

    from extender.api.ec2nodeclass import API_VERSION as NODE_CLASS_API_VERSION
    from extender.api.ec2nodeclass import PLURAL as NODE_CLASS_PLURAL
    from extender.api.nodepool import API_VERSION as NODEPOOL_API_VERSION
    from extender.api.nodepool import PLURAL as NODEPOOL_PLURAL
    from extender.cli.plan import plan_settings
    from extender.cluster import client as kube_client
    from extender.cluster import nodes, pods
    from extender.cluster.pool_resources import list_custom, list_node_templates, load_configured

    settings = plan_settings()
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
        # Read as the controller reads them: templates and classes resolve providerRef and nodeClassRef.
        templates = list_node_templates(kube)
        class_group, class_version = NODE_CLASS_API_VERSION.split("/")
        classes = list_custom(kube, class_group, class_version, NODE_CLASS_PLURAL)
        pools = load_pools(provisioners, lambda obj: load_configured(obj, settings, templates, classes))
        karpy_nodes = nodes.list_node_manifests(kube, karpy_only=True)
        assigned = pods.list_assigned(kube)
        failed = kube_client.call_json(
            client.CoreV1Api(kube).list_event_for_all_namespaces, field_selector="reason=FailedProvisioning"
        )
        status = summarize(
            pools,
            karpy_nodes,
            pods.list_pending(kube)[0],
            assigned,
            prices=prices,
            now=time.time(),
            reasons=karpy_reasons(failed.get("items") or []),
        )
        if metrics_url:
            return status, from_controller(status, _scrape(metrics_url))
        text, tried = discover_metrics(kube, settings)
    if text is not None:
        return status, from_controller(status, text)
    loaded = [pool.model for pool in pools if pool.model is not None]
    figures = dash.from_api(loaded, karpy_nodes, assigned, price_per_hour=status.price_per_hour)
    return status, dataclasses.replace(figures, unreachable=f"no controller metrics: {tried}; or --metrics")


#: The chart's Service in front of the controllers' metrics port (charts/karpy/templates/controller).
METRICS_SERVICE = "karpy-controller:metrics"
DISCOVERY_TIMEOUT = 3.0


def discover_metrics(kube: Any, settings: Any) -> tuple[str | None, str]:
    """The controller's /metrics text without a flag: first the chart's Service through the API
    server's service proxy (what `kubectl get --raw` reaches; works from a laptop and in-cluster),
    then a controller on this machine at its metrics bind (KARPY_EXTENDER_METRICS_BIND, as a local
    run sets it). Returns (text, where) or (None, what was tried)."""
    from kubernetes import client

    tried = []
    service = f"service {settings.namespace}/{METRICS_SERVICE.replace(':', ' port ')}"
    try:
        response = client.CoreV1Api(kube).connect_get_namespaced_service_proxy_with_path(
            METRICS_SERVICE,
            settings.namespace,
            "metrics",
            _preload_content=False,
            _request_timeout=DISCOVERY_TIMEOUT,
        )
        return response.data.decode(), service
    except Exception as err:  # 404 without the chart, 503 without a ready pod, refused, timeout
        tried.append(f"{service} ({getattr(err, 'status', None) or type(err).__name__})")
    bind = settings.extender.metrics_bind
    if bind and bind != settings.extender.bind:
        host, _, port = bind.rpartition(":")
        url = f"http://{'127.0.0.1' if host in ('', '0.0.0.0') else host}:{port}/metrics"
        try:
            return _scrape(url, timeout=DISCOVERY_TIMEOUT), url
        except UsageError:
            tried.append(f"{url} (unreachable)")
    return None, ", ".join(tried)
