"""The dashboards' figures for `karpy status`: pod startup p50/p95 (creation to bound and to Ready),
Provisioner usage against limits, and $/h against the lower bound.

Read from the controller's /metrics when `karpy status --metrics URL` names it (the figures the
dashboards plot: the startup histogram since the controller started, the leader's gauges), else
from the API server (the pods on karpy's nodes now, their Provisioners' limits and nodes' capacity;
the lower bound needs the controller). Pure: scrape text or API JSON in, `Figures` out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from extender.api import labels as wk
from extender.api.provisioner import Provisioner
from extender.api.quantity import QuantityError, parse_quantity
from extender.provisioning.startup import condition_since, timestamp

STAGES = ("bound", "ready")


@dataclass(frozen=True)
class Startup:
    until: str
    pods: int
    p50: float | None
    p95: float | None


@dataclass(frozen=True)
class Limit:
    provisioner: str
    resource: str
    used: float
    limit: float

    @property
    def share(self) -> float | None:
        return self.used / self.limit if self.limit > 0 else None


@dataclass(frozen=True)
class Figures:
    source: str  # "metrics" or "pods"
    startup: tuple[Startup, ...]
    limits: tuple[Limit, ...]
    price_per_hour: float
    #: Consolidating Provisioners only (karpenter_consolidation_*); None without the controller's metrics.
    consolidating_cost: float | None = None
    lower_bound: float | None = None
    #: Without the controller's metrics: where `karpy status` looked for them and why it got none.
    unreachable: str = ""


def histogram_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float | None:
    """Prometheus's histogram_quantile over cumulative (upper bound, count) buckets, +Inf last:
    linear interpolation inside the bucket the rank falls in; None without observations."""
    buckets = sorted(buckets)
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    lower, below = 0.0, 0.0
    for upper, count in buckets:
        if count >= rank:
            if math.isinf(upper):
                return lower  # above the highest finite bound: Prometheus answers that bound
            if count == below:
                return upper
            # Prometheus's order of operations (bucketQuantile), so both give the same float.
            return lower + (upper - lower) * ((rank - below) / (count - below))
        lower, below = upper, count
    return lower


def nearest_rank(q: float, values: Sequence[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(math.ceil(q * len(ordered)) - 1, 0)]


def from_metrics(text: str) -> Figures:
    """The figures from a scrape of the controller's /metrics."""
    buckets: dict[str, dict[float, float]] = {stage: {} for stage in STAGES}
    counts = dict.fromkeys(STAGES, 0.0)
    usage: dict[tuple[str, str], float] = {}
    limits: dict[tuple[str, str], float] = {}
    price = cost = bound = 0.0
    consolidating = False
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = s.labels
            if s.name == "karpy_pods_startup_duration_seconds_bucket" and labels.get("until") in buckets:
                le = float(labels["le"])
                buckets[labels["until"]][le] = buckets[labels["until"]].get(le, 0.0) + s.value
            elif s.name == "karpy_pods_startup_duration_seconds_count" and labels.get("until") in counts:
                counts[labels["until"]] += s.value
            elif s.name == "karpy_provisioner_usage":
                usage[labels["provisioner"], labels["resource_type"]] = s.value
            elif s.name == "karpy_provisioner_limit":
                limits[labels["provisioner"], labels["resource_type"]] = s.value
            elif s.name == "karpy_nodes_price_dollars_per_hour":
                price += s.value
            elif s.name == "karpenter_consolidation_cluster_cost_dollars_per_hour":
                cost, consolidating = cost + s.value, True
            elif s.name == "karpenter_consolidation_lower_bound_dollars_per_hour":
                bound += s.value
    startup = tuple(
        Startup(
            stage,
            int(counts[stage]),
            histogram_quantile(0.5, list(buckets[stage].items())),
            histogram_quantile(0.95, list(buckets[stage].items())),
        )
        for stage in STAGES
    )
    return Figures(
        source="metrics",
        startup=startup,
        limits=tuple(Limit(p, r, usage.get((p, r), 0.0), v) for (p, r), v in sorted(limits.items())),
        price_per_hour=price,
        consolidating_cost=cost if consolidating else None,
        lower_bound=bound if consolidating else None,
    )


def _quantity(raw: Any) -> float | None:
    try:
        return parse_quantity(raw)
    except (QuantityError, TypeError, ValueError):
        return None


def from_api(
    provisioners: Iterable[Provisioner],
    nodes: Iterable[Mapping[str, Any]],
    assigned: Iterable[Mapping[str, Any]],
    *,
    price_per_hour: float,
) -> Figures:
    """The figures from the Provisioners and NodePools karpy loaded and API JSON: karpy's Nodes and
    bound pods (those on karpy's nodes count for startup)."""
    owner: dict[str, str] = {}
    capacity: dict[str, dict[str, float]] = {}
    for node in nodes:
        meta = node.get("metadata") or {}
        prov = wk.owner_of(meta.get("labels") or {})
        if not prov:
            continue
        owner[meta.get("name", "")] = prov
        total = capacity.setdefault(prov, {})
        for name, raw in ((node.get("status") or {}).get("capacity") or {}).items():
            if (amount := _quantity(raw)) is not None:
                total[name] = total.get(name, 0.0) + amount
    waits: dict[str, list[float]] = {stage: [] for stage in STAGES}
    for pod in assigned:
        if (pod.get("spec") or {}).get("nodeName") not in owner:
            continue
        created = timestamp((pod.get("metadata") or {}).get("creationTimestamp"))
        if created is None:
            continue
        for stage, condition in zip(STAGES, ("PodScheduled", "Ready"), strict=True):
            if (at := condition_since(pod, condition)) is not None:
                waits[stage].append(max(at - created, 0.0))
    limits = []
    for pool in provisioners:
        for resource in sorted(pool.limited | pool.limits.names()):
            used = capacity.get(pool.name, {}).get(resource, 0.0)
            limits.append(Limit(pool.name, resource, used, pool.limits.get(resource)))
    return Figures(
        source="pods",
        startup=tuple(
            Startup(s, len(w), nearest_rank(0.5, w), nearest_rank(0.95, w)) for s, w in waits.items()
        ),
        limits=tuple(limits),
        price_per_hour=price_per_hour,
    )
