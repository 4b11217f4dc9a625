"""`karpy status`'s dashboard figures (startup p50/p95, usage against limits, $/h against the lower
bound) from a scrape and from API JSON, and `--watch`."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from functools import partial

import pytest
from prometheus_client import CollectorRegistry, Gauge, Histogram, generate_latest

from extender.cli import figures, status
from extender.cli.main import UsageError, main
from extender.cli.plan import plan_settings
from extender.cluster.pool_resources import load_configured
from tests import builders

T0 = datetime(2026, 12, 2, 12, 0, 0, tzinfo=UTC)


def at(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_histogram_quantile_interpolates_as_prometheus_does() -> None:
    # prometheus/promql/quantile.go bucketQuantile: linear inside the bucket the rank falls in, the
    # first bucket starting at 0, a rank in the +Inf bucket answered with the highest finite bound.
    buckets = [(1.0, 0.0), (2.0, 5.0), (4.0, 10.0), (float("inf"), 10.0)]
    assert figures.histogram_quantile(0.5, buckets) == 2.0
    assert figures.histogram_quantile(0.95, buckets) == pytest.approx(3.8)
    assert figures.histogram_quantile(0.5, [(10.0, 4.0), (float("inf"), 4.0)]) == 5.0
    assert figures.histogram_quantile(0.99, [(10.0, 1.0), (float("inf"), 4.0)]) == 10.0
    assert figures.histogram_quantile(0.5, [(10.0, 0.0), (float("inf"), 0.0)]) is None


def scrape() -> str:
    registry = CollectorRegistry()
    startup = Histogram(
        "karpy_pods_startup_duration_seconds",
        "x",
        ["provisioner", "until"],
        buckets=(5, 10, 20, 40),
        registry=registry,
    )
    for seconds in (3, 7, 8, 12, 30):
        startup.labels("a", "bound").observe(seconds)
    startup.labels("b", "bound").observe(9)
    startup.labels("a", "ready").observe(15)
    usage = Gauge("karpy_provisioner_usage", "x", ["provisioner", "resource_type"], registry=registry)
    limit = Gauge("karpy_provisioner_limit", "x", ["provisioner", "resource_type"], registry=registry)
    usage.labels("a", "cpu").set(24)
    limit.labels("a", "cpu").set(32)
    limit.labels("a", "memory").set(64 * 1024**3)
    price = Gauge(
        "karpy_nodes_price_dollars_per_hour",
        "x",
        ["provisioner", "capacity_type", "instance_type", "zone"],
        registry=registry,
    )
    price.labels("a", "spot", "m5.large", "z1").set(0.1)
    price.labels("b", "on-demand", "c5.xlarge", "z2").set(0.17)
    for name, value in (("cluster_cost", 0.1), ("lower_bound", 0.08)):
        suffix = "cost_dollars_per_hour" if name == "cluster_cost" else "bound_dollars_per_hour"
        full = f"karpenter_consolidation_{name.split('_')[0]}_{suffix}"
        Gauge(full, "x", ["provisioner"], registry=registry).labels("a").set(value)
    return generate_latest(registry).decode()


def test_figures_from_the_controllers_metrics_are_the_dashboards() -> None:
    result = figures.from_metrics(scrape())
    bound, ready = result.startup
    # Both Provisioners' buckets summed, as `sum by (le)` does: 6 pods, rank 3 in (5, 10].
    assert (bound.until, bound.pods) == ("bound", 6)
    assert bound.p50 == pytest.approx(5 + 5 * (3 - 1) / 3)
    assert (ready.pods, ready.p50) == (1, pytest.approx(15.0))
    assert result.limits == (
        figures.Limit("a", "cpu", 24, 32),
        figures.Limit("a", "memory", 0, 64 * 1024**3),
    )
    assert result.limits[0].share == 0.75
    assert result.price_per_hour == pytest.approx(0.27)
    assert (result.consolidating_cost, result.lower_bound) == (pytest.approx(0.1), pytest.approx(0.08))
    text = status.render_figures(result)
    assert "bound  6" in text and "75%" in text and "64Gi" in text
    assert "lower bound of $0.0800/h (1.25x)" in text


def started(scheduled: float | None, ready: float | None) -> list[dict]:
    """A pod's PodScheduled (when `scheduled`) and Ready conditions, `ready` None = not Ready."""
    conditions = []
    if scheduled is not None:
        conditions.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": at(scheduled)})
    conditions.append(
        {
            "type": "Ready",
            "status": "True" if ready is not None else "False",
            "lastTransitionTime": at(ready or 0),
        }
    )
    return conditions


#: A pod created at T0; keywords as tests.builders.pod_manifest.
bound_pod = partial(builders.pod_manifest, namespace=None, uid="", image=None, created=T0)


def test_figures_from_the_api_read_the_pods_on_karpys_nodes_now() -> None:
    v1alpha5 = {"metadata": {"name": "a"}, "spec": {"limits": {"resources": {"cpu": "16", "pods": "0"}}}}
    # A NodePool's limits are the map itself; read, as the v1alpha5 ones, from the loaded model.
    nodepool = {
        "kind": "NodePool",
        "metadata": {"name": "b"},
        "spec": {
            "limits": {"memory": "64Gi"},
            "template": {
                "spec": {
                    "requirements": [],
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "c"},
                }
            },
        },
    }
    provisioners = [load_configured(obj, plan_settings()) for obj in (v1alpha5, nodepool)]
    nodes = [
        builders.node_manifest(
            n, provisioner="a", instance=None, ready=None, capacity={"cpu": cpu, "memory": "16Gi"}
        )
        for n, cpu in (("n1", "4"), ("n2", "8"))
    ]
    assigned = [
        bound_pod("p1", node_name="n1", conditions=started(4, 6)),
        bound_pod("p2", node_name="n1", conditions=started(10, None)),  # not Ready yet
        bound_pod("p3", node_name="n2", conditions=started(20, 25)),
        bound_pod("elsewhere", node_name="managed-1", conditions=started(1, 1)),
    ]
    result = figures.from_api(provisioners, nodes, assigned, price_per_hour=0.5)
    bound, ready = result.startup
    assert (bound.pods, bound.p50, bound.p95) == (3, 10.0, 20.0)
    assert (ready.pods, ready.p50, ready.p95) == (2, 6.0, 25.0)
    assert result.limits == (
        figures.Limit("a", "cpu", 12.0, 16.0),
        figures.Limit("a", "pods", 0.0, 0.0),  # a limit of 0 is one ("launch nothing")
        figures.Limit("b", "memory", 0.0, 64 * 1024**3),
    )
    assert (result.price_per_hour, result.lower_bound) == (0.5, None)
    assert "lower bound - (from the controller: --metrics)" in status.render_figures(result)


def test_watch_redraws_until_interrupted_and_survives_a_failed_refresh() -> None:
    shown: list[str] = []
    readings = iter(["first", RuntimeError("connection refused"), "third"])

    def draw() -> str:
        value = next(readings)
        if isinstance(value, Exception):
            raise value
        return value

    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        if len(slept) == 3:
            raise KeyboardInterrupt

    assert status.watch(draw, 2, out=shown.append, sleep=sleep) == 0
    assert [s.split("\n")[0].removeprefix(status.CLEAR) for s in shown[:3]] == [
        "first",
        "error: connection refused",
        "third",
    ]
    assert slept == [2, 2, 2] and shown[-1] == ""
    assert status.watch(lambda: "x", 1, out=shown.append, sleep=sleep, rounds=2) == 0


@pytest.mark.parametrize("every", [0.5, 7200])
def test_watch_intervals_are_bounded(every: float, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(UsageError, match="between 1 and 3600"):
        status.watch(lambda: "x", every)
    assert main(["status", "--watch", str(every)]) == 2
    assert "--watch: SECONDS must be between 1 and 3600" in capsys.readouterr().err


def test_an_unreachable_metrics_url_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match=re.escape("reading metrics from http://127.0.0.1:9/metrics")):
        status._scrape("http://127.0.0.1:9/metrics")
