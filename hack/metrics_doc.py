"""Generate docs/metrics.md: every metric karpy exports, read from the metric objects themselves.

Every module of `extender` is imported, so each module-level metric registers with the default
registry (the controller's /metrics); the webhook's metrics live on a registry per app and are read
from a fresh `WebhookMetrics`. tests/unit/test_metrics_doc.py fails when the file and the code differ.

Usage: ``python -m hack.metrics_doc`` rewrites the file; ``--check`` exits 1 when it is stale.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.metrics import MetricWrapperBase

import extender

DOC = Path(__file__).resolve().parent.parent / "docs" / "metrics.md"

HEADER = """# Metrics

Every metric karpy exports, generated from the code by `python -m hack.metrics_doc` (a test fails
when this table and the code differ). The controller serves its metrics on `/metrics` of the
metrics port (`KARPY_EXTENDER_METRICS_BIND`, 8089 in the chart), the webhook on `/metrics` of its
TLS port. Names follow the Prometheus conventions: base units (seconds, bytes, cores, dollars per
hour) named in the metric, counters end in `_total`; a histogram `x` is exported as `x_bucket`,
`x_sum` and `x_count`. The controller's Karpenter-named metrics (`karpenter_*`) keep Karpenter's
names so its dashboards read them. Gauges of the cluster's state (`karpy_nodes*`,
`karpy_provisioner_*`, `karpy_pods_pending*`) are reported by the leader only, every 5 s.

Grafana dashboards and PrometheusRule alerts built on these ship in the Helm chart
(`charts/karpy`, values `monitoring.*`); `tests/integration/test_live_metrics.py` checks every
metric and label they name against a live scrape.

| metric | type | labels | exported by | meaning |
|---|---|---|---|---|
"""


@dataclass(frozen=True)
class Metric:
    name: str  # as exported (counters with _total)
    kind: str
    labels: tuple[str, ...]
    exporter: str
    help: str


def _import_all() -> None:
    for module in pkgutil.walk_packages(extender.__path__, "extender."):
        importlib.import_module(module.name)


def _metrics(registry: CollectorRegistry, exporter: str) -> list[Metric]:
    found = []
    for collector in list(registry._collector_to_names):  # the registered collectors
        if not isinstance(collector, MetricWrapperBase):
            continue  # prometheus_client's own process/platform/gc collectors
        kind = str(collector._type)
        name = collector._name + ("_total" if kind == "counter" else "")
        found.append(Metric(name, kind, tuple(collector._labelnames), exporter, collector._documentation))
    return found


def metrics() -> list[Metric]:
    """Every metric of the controller and the webhook, by name."""
    _import_all()
    from webhook.metrics import WebhookMetrics

    webhook = WebhookMetrics(CollectorRegistry())
    return sorted(
        [*_metrics(REGISTRY, "controller"), *_metrics(webhook.registry, "webhook")], key=lambda m: m.name
    )


def render(items: Iterable[Metric]) -> str:
    rows = [
        f"| `{m.name}` | {m.kind} | {', '.join(f'`{label}`' for label in m.labels) or '-'} "
        f"| {m.exporter} | {m.help.replace('|', '/')} |"
        for m in items
    ]
    return HEADER + "\n".join(rows) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    text = render(metrics())
    if args == ["--check"]:
        if DOC.read_text() != text:
            print(f"{DOC} is stale: run python -m hack.metrics_doc", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text)
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
