"""Prometheus metrics of the admission webhook, on a per-app registry (create_app may run many times)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

# Admission is on the API server's request path: the interesting range is sub-millisecond to the timeout.
_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 2.5)


class WebhookMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.requests = Counter(
            "karpy_webhook_requests_total",
            "Admission requests by path and result (allowed, patched, denied, bad_request, error).",
            ["path", "result"],
            registry=self.registry,
        )
        self.duration = Histogram(
            "karpy_webhook_request_duration_seconds",
            "Time to answer an admission request.",
            ["path"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.provisioner_lists = Counter(
            "karpy_webhook_provisioner_list_total",
            "Provisioner lists from the API server by result (ok, error).",
            ["result"],
            registry=self.registry,
        )
        # Both outcomes exported from the start, so the errors alert sees the first failure as an increase.
        for result in ("ok", "error"):
            self.provisioner_lists.labels(result)

    def observe(self, path: str, result: str, seconds: float) -> None:
        self.requests.labels(path, result).inc()
        self.duration.labels(path).observe(seconds)

    def render(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
