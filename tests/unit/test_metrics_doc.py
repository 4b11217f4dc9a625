"""docs/metrics.md is the metrics the code registers (hack/metrics_doc.py), and every metric follows
the Prometheus naming conventions (https://prometheus.io/docs/practices/naming/)."""

from __future__ import annotations

import re

import pytest

from hack import metrics_doc

# Gauges whose unit depends on a label (resource_type: cores, bytes or a count), or that count things.
UNITLESS = {
    "karpy_provisioner_usage",
    "karpy_provisioner_limit",
    "karpy_nodes",
    "karpy_pods_pending",
    "karpy_batch_pods",
    "karpy_cluster_bound_pods",
    "karpy_interruption_queue_messages",
    "karpenter_leader_election_is_leader",
    "karpy_unhandled_objects",
    "karpy_consolidation_action_evicted_pods",
}


@pytest.fixture(scope="module")
def metrics() -> list[metrics_doc.Metric]:
    return metrics_doc.metrics()


def test_the_table_lists_exactly_the_registered_metrics(metrics: list[metrics_doc.Metric]) -> None:
    documented = metrics_doc.DOC.read_text()
    assert documented == metrics_doc.render(metrics), "docs/metrics.md is stale: python -m hack.metrics_doc"
    rows = re.findall(r"^\| `([a-z_:]+)` \|", documented, re.M)
    assert sorted(rows) == sorted(m.name for m in metrics) and len(rows) == len(set(rows))


def test_a_missing_row_or_a_row_without_a_metric_is_caught(
    metrics: list[metrics_doc.Metric],
) -> None:
    table = metrics_doc.render(metrics)
    assert metrics_doc.render(metrics[1:]) != table
    extra = metrics_doc.Metric("karpy_made_up_total", "counter", (), "controller", "Not a metric.")
    assert metrics_doc.render([*metrics, extra]) != table


def test_names_follow_the_prometheus_conventions(metrics: list[metrics_doc.Metric]) -> None:
    for m in metrics:
        assert re.fullmatch(r"(karpy|karpenter)_[a-z][a-z0-9_]*", m.name), m.name
        assert m.name.endswith("_total") == (m.kind == "counter"), f"{m.name}: _total iff a counter"
        help_text = m.help.lower()
        if m.kind in ("histogram", "gauge") and m.name not in UNITLESS:
            assert m.name.endswith(("_seconds", "_bytes", "_dollars_per_hour", "_ratio")), (
                f"{m.name}: a {m.kind} names its base unit"
            )
        if "seconds" in help_text or "duration" in help_text or "how long" in help_text:
            assert "_seconds" in m.name, f"{m.name} measures time: unit _seconds"
        assert all(re.fullmatch(r"[a-z][a-z0-9_]*", label) for label in m.labels), m.labels
        assert m.help.endswith("."), f"{m.name}: help is a sentence"
