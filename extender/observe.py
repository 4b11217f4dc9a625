"""The observer: gauges of what karpy's informers hold, refreshed every REFRESH_SECONDS on the leader.

karpy_pods_pending / karpy_pods_pending_oldest_seconds {reason}, karpy_nodes and
karpy_nodes_price_dollars_per_hour {provisioner, capacity_type, instance_type, zone},
karpy_provisioner_usage / karpy_provisioner_limit {provisioner, resource_type}.

Only the leader reports them (a follower's would count every node twice in a `sum`); a replica that
stops leading removes its series. The figures are computed from plain data (`pending_figures`,
`node_figures`, `limit_figures`) and then set, a label set that disappeared removed, so a scrape
never sees a half-cleared gauge.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client import Gauge

from extender.api import labels as wk
from extender.api.node import Node
from extender.api.provisioner import Provisioner
from extender.cloud.types import CloudProvider
from extender.cluster import inventory
from extender.cluster import nodes as kube_nodes
from extender.cluster import pool_resources as kube_provisioners
from extender.lifecycle import metrics as lifecycle_metrics
from extender.lifecycle.consolidation.snapshot import price
from extender.loops import run_forever
from extender.provisioning import metrics as provisioning_metrics
from extender.provisioning import pending
from extender.provisioning.controller import ProvisioningController
from extender.provisioning.startup import timestamp
from extender.settings import Settings

log = logging.getLogger("karpy.controller.metrics")

REFRESH_SECONDS = 5.0

NodeLabels = tuple[str, str, str, str]  # provisioner, capacity_type, instance_type, zone


@dataclass(frozen=True)
class Pending:
    count: int
    oldest_seconds: float


def pending_figures(
    pods: Mapping[str, Mapping[str, Any]], reason_of: Callable[[str], str], now: float
) -> dict[str, Pending]:
    """Pending pods (key -> API JSON) per reason, with the age of the oldest; every reason present."""
    ages: dict[str, list[float]] = {reason: [] for reason in pending.REASONS}
    for key, pod in pods.items():
        created = timestamp((pod.get("metadata") or {}).get("creationTimestamp"))
        ages[reason_of(key)].append(max(now - created, 0.0) if created is not None else 0.0)
    return {reason: Pending(len(a), max(a, default=0.0)) for reason, a in ages.items()}


def node_figures(
    nodes: Iterable[Node], price_of: Callable[[Node], float]
) -> dict[NodeLabels, tuple[int, float]]:
    """karpy's nodes -> (count, $/h) per (provisioner, capacity type, instance type, zone)."""
    result: dict[NodeLabels, tuple[int, float]] = {}
    for node in nodes:
        if node.provisioner is None:
            continue
        key = (
            node.provisioner,
            node.labels.get(wk.CAPACITY_TYPE, wk.CAPACITY_TYPE_ON_DEMAND),
            node.labels.get(wk.INSTANCE_TYPE, ""),
            node.labels.get(wk.ZONE, ""),
        )
        count, dollars = result.get(key, (0, 0.0))
        result[key] = (count + 1, dollars + price_of(node))
    return result


def limit_figures(
    provisioners: Iterable[Provisioner], nodes: Iterable[Node]
) -> dict[tuple[str, str], tuple[float, float]]:
    """(provisioner, resource) -> (usage, limit) for every limit a Provisioner sets; usage counts its
    live and in-flight nodes' capacity (cores, bytes, counts), as its limits are enforced."""
    usage = inventory.usage(nodes)
    result = {}
    for prov in provisioners:
        used = usage.get(prov.name)
        for name in sorted(prov.limited | prov.limits.names()):
            result[(prov.name, name)] = (used.get(name) if used else 0.0, prov.limits.get(name))
    return result


class _Series:
    """The label sets a gauge was last given, so those that disappear are removed (not zeroed)."""

    def __init__(self, gauge: Gauge) -> None:
        self.gauge = gauge
        self.current: set[tuple[str, ...]] = set()

    def set(self, values: Mapping[tuple[str, ...], float]) -> None:
        for labels, value in values.items():
            self.gauge.labels(*labels).set(value)
        for gone in self.current - set(values):
            self.gauge.remove(*gone)
        self.current = set(values)


class Observer:
    def __init__(
        self,
        *,
        settings: Settings,
        kube: Any,
        cloud: CloudProvider,
        provisioning: ProvisioningController,
        is_leader: Callable[[], bool],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.kube = kube
        self.cloud = cloud
        self.provisioning = provisioning
        self.is_leader = is_leader
        self.clock = clock
        p, lm = provisioning_metrics, lifecycle_metrics
        self._series = {
            name: _Series(gauge)
            for name, gauge in (
                ("pending", p.PODS_PENDING),
                ("oldest", p.PODS_PENDING_OLDEST),
                ("nodes", lm.NODES),
                ("price", lm.NODES_PRICE),
                ("usage", lm.PROVISIONER_USAGE),
                ("limit", lm.PROVISIONER_LIMIT),
            )
        }

    def refresh(self) -> None:
        if not self.is_leader():
            self._set({name: {} for name in self._series})
            return
        prov = self.provisioning
        state = prov.state
        pods = pending_figures(
            prov.watcher.pending(),
            lambda key: prov.pipeline.reporter.reasons.reason(key, held=state.held(key) is not None),
            self.clock(),
        )
        nodes = [n for n in prov.nodes.current(self._list_nodes) if n.provisioner is not None]
        catalog = {it.name: it for it in self.cloud.get_instance_types(None)} if nodes else {}
        by_node = node_figures(nodes, lambda node: price(catalog, node.labels))
        provisioners = kube_provisioners.list_configured(self.kube, self.settings)
        limits = limit_figures(provisioners, nodes)
        self._set(
            {
                "pending": {(r,): f.count for r, f in pods.items()},
                "oldest": {(r,): f.oldest_seconds for r, f in pods.items()},
                "nodes": {k: count for k, (count, _) in by_node.items()},
                "price": {k: dollars for k, (_, dollars) in by_node.items()},
                "usage": {k: used for k, (used, _) in limits.items()},
                "limit": {k: limit for k, (_, limit) in limits.items()},
            }
        )

    def _set(self, values: Mapping[str, Mapping[tuple[str, ...], float]]) -> None:
        for name, series in self._series.items():
            series.set(values[name])

    def _list_nodes(self) -> Sequence[Mapping[str, Any]]:
        return kube_nodes.list_node_manifests(self.kube)

    def run(self, stop: threading.Event) -> None:
        def one_pass() -> float:
            self.refresh()
            return REFRESH_SECONDS

        run_forever(one_pass, stop, doing="refreshing metrics", logger=log)

    def start(self, stop: threading.Event) -> threading.Thread:
        thread = threading.Thread(target=self.run, args=(stop,), name="metrics-observer", daemon=True)
        thread.start()
        return thread
