"""The metrics of issue 26 from plain data: pod startup (once per pod, karpy's nodes only, the
leader only), pending pods by reason, nodes and their $/h, usage against limits, disruption
decisions. Values are read back from prometheus_client's registry, as a scrape would see them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from prometheus_client import REGISTRY, CollectorRegistry, Gauge

from extender.api import labels
from extender.api.node import Node
from extender.api.provisioner import Provisioner
from extender.api.resources import Resources
from extender.lifecycle import emptiness
from extender.lifecycle import metrics as lifecycle_metrics
from extender.lifecycle.context import Context
from extender.observe import _Series, limit_figures, node_figures, pending_figures
from extender.provisioning import pending
from extender.provisioning.startup import StartupTracker
from extender.settings import Settings
from extender.state import ClusterState
from tests.builders import T0, node, stamp

NOW = datetime(2026, 12, 2, 12, 0, 0, tzinfo=UTC)


def at(seconds: float) -> str:
    return (NOW + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def live_pod(
    uid: str, *, node: str = "", scheduled: float | None = None, ready: float | None = None
) -> dict[str, Any]:
    conditions = []
    if scheduled is not None:
        conditions.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": at(scheduled)})
    if ready is not None:
        conditions.append({"type": "Ready", "status": "True", "lastTransitionTime": at(ready)})
    return {
        "metadata": {"namespace": "ns", "name": uid, "uid": uid, "creationTimestamp": at(0)},
        "spec": {"nodeName": node} if node else {},
        "status": {"conditions": conditions},
    }


class Startup:
    """A tracker whose nodes `karpy-*` belong to Provisioner `prov-<test>`."""

    def __init__(self, provisioner: str, *, leader: bool = True) -> None:
        self.provisioner = provisioner
        self.tracker = StartupTracker(
            lambda name: provisioner if name.startswith("karpy-") else None,
            is_leader=lambda: leader,
            clock=lambda: (NOW + timedelta(seconds=99)).timestamp(),
            monotonic=lambda: 0.0,
        )

    def count(self, until: str) -> float:
        return sample("karpy_pods_startup_duration_seconds_count", provisioner=self.provisioner, until=until)

    def total(self, until: str) -> float:
        return sample("karpy_pods_startup_duration_seconds_sum", provisioner=self.provisioner, until=until)


def test_startup_is_observed_once_per_stage_from_creation() -> None:
    s = Startup("startup-once")
    s.tracker.pending(live_pod("a"))
    s.tracker.on_bound("ADDED", live_pod("a", node="karpy-1", scheduled=7))
    assert (s.count("bound"), s.total("bound"), s.count("ready")) == (1, 7, 0)
    # A later event of the same pod (Ready now) adds the ready stage and nothing to bound.
    s.tracker.on_bound("MODIFIED", live_pod("a", node="karpy-1", scheduled=7, ready=12))
    s.tracker.on_bound("MODIFIED", live_pod("a", node="karpy-1", scheduled=7, ready=12))
    s.tracker.on_bound("SYNC", live_pod("a", node="karpy-1", scheduled=7, ready=12))
    assert (s.count("bound"), s.total("bound"), s.count("ready"), s.total("ready")) == (1, 7, 1, 12)
    # Seen pending again (a stale watch event): it was measured, it is not measured twice.
    s.tracker.pending(live_pod("a"))
    s.tracker.on_bound("MODIFIED", live_pod("a", node="karpy-1", scheduled=7, ready=12))
    assert (s.count("bound"), s.count("ready")) == (1, 1)
    assert s.tracker.tracked() == 0


def test_startup_counts_only_pods_seen_pending_on_karpy_nodes_and_only_on_the_leader() -> None:
    s = Startup("startup-filter")
    # Never seen pending (e.g. running before this process started): not measured.
    s.tracker.on_bound("SYNC", live_pod("old", node="karpy-1", scheduled=5, ready=6))
    # Bound to a node karpy does not own: dropped.
    s.tracker.pending(live_pod("other"))
    s.tracker.on_bound("ADDED", live_pod("other", node="managed-ng-1", scheduled=3))
    assert (s.count("bound"), s.tracker.tracked()) == (0, 0)
    # A bind whose PodScheduled condition carries no time is measured at the clock (99 s).
    s.tracker.pending(live_pod("untimed"))
    s.tracker.on_bound("ADDED", {**live_pod("untimed", node="karpy-2"), "status": {}})
    assert (s.count("bound"), s.total("bound")) == (1, 99)
    follower = Startup("startup-follower", leader=False)
    follower.tracker.pending(live_pod("f"))
    follower.tracker.on_bound("ADDED", live_pod("f", node="karpy-1", scheduled=4, ready=5))
    assert (follower.count("bound"), follower.count("ready"), follower.tracker.tracked()) == (0, 0, 0)


def test_a_deleted_pod_stops_being_tracked() -> None:
    s = Startup("startup-deleted")
    s.tracker.pending(live_pod("gone"))
    s.tracker.on_bound("DELETED", live_pod("gone", node="karpy-1"))
    assert s.tracker.tracked() == 0 and s.count("bound") == 0


def test_pending_figures_count_and_age_each_reason() -> None:
    reasons = pending.PendingReasons(clock=lambda: 0.0)
    reasons.set("ns/limited", pending.OVER_LIMIT)
    reasons.set("ns/odd", pending.UNMODELLED)
    reasons.set("ns/fixed", pending.UNMODELLED)
    reasons.clear(["ns/fixed"])  # planned afresh by a later batch
    reasons.set("ns/tainted", pending.code("taint"))  # explained: every pool's taint refuses it
    pods = {
        key: {"metadata": {"creationTimestamp": at(-age)}}
        for key, age in {
            "ns/a": 30,
            "ns/b": 300,
            "ns/limited": 50,
            "ns/odd": 5,
            "ns/fixed": 20,
            "ns/held": 8,
            "ns/tainted": 12,
        }.items()
    }
    figures = pending_figures(pods, lambda key: reasons.reason(key, held=key == "ns/held"), NOW.timestamp())
    assert {r: (f.count, f.oldest_seconds) for r, f in figures.items()} == {
        "waiting_for_capacity": (3, 300),
        "left_to_scheduler": (1, 8),
        "unmodelled": (1, 5),
        "over_limit": (1, 50),
        "taint": (1, 12),
        # Every other reason code is exported at 0: a fixed, bounded set of series.
        **{r: (0, 0) for r in pending.EXPLAINED if r != "taint"},
    }
    assert pending_figures({}, lambda _: pending.WAITING, 0)["waiting_for_capacity"].count == 0
    with pytest.raises(ValueError, match="not one of"):
        reasons.set("ns/a", "bored")


def karpy_node(
    name: str, itype: str, zone: str, capacity: str, cpu: float, provisioner: str = "default"
) -> Node:
    return Node(
        name=name,
        labels={
            labels.PROVISIONER_NAME: "default",
            labels.INSTANCE_TYPE: itype,
            labels.ZONE: zone,
            labels.CAPACITY_TYPE: capacity,
        },
        capacity=Resources.of(cpu=cpu, memory=cpu * 2 * 1024**3, pods=58),
    )


def test_node_figures_group_count_and_price_by_provisioner_capacity_type_type_and_zone() -> None:
    nodes = [
        karpy_node("a", "m5.large", "us-west-2a", "spot", 2),
        karpy_node("b", "m5.large", "us-west-2a", "spot", 2),
        karpy_node("c", "c5.xlarge", "us-west-2b", "on-demand", 4),
        Node(name="not-karpy", labels={labels.INSTANCE_TYPE: "m5.large"}),
    ]
    prices = {"m5.large": 0.04, "c5.xlarge": 0.17}
    figures = node_figures(nodes, lambda n: prices[n.labels[labels.INSTANCE_TYPE]])
    assert figures == {
        ("default", "spot", "m5.large", "us-west-2a"): (2, pytest.approx(0.08)),
        ("default", "on-demand", "c5.xlarge", "us-west-2b"): (1, 0.17),
    }


def test_limit_figures_report_every_limit_in_base_units_with_in_flight_nodes_counted() -> None:
    nodes = [karpy_node("a", "m5.large", "z", "spot", 2), karpy_node("b", "m5.large", "z", "spot", 4)]
    limited = Provisioner(
        "default",
        limits=Resources.of(cpu=10, memory=64 * 1024**3),
        limited=frozenset({"cpu", "memory", "nvidia.com/gpu"}),
    )
    unlimited = Provisioner("spare")
    assert limit_figures([limited, unlimited], nodes) == {
        ("default", "cpu"): (6.0, 10.0),
        ("default", "memory"): (12.0 * 1024**3, 64.0 * 1024**3),
        ("default", "nvidia.com/gpu"): (0.0, 0.0),  # a limit of 0 is a limit
    }


def test_a_label_set_that_disappears_is_removed_not_zeroed() -> None:
    registry = CollectorRegistry()
    gauge = Gauge("karpy_test_series", "test", ["provisioner"], registry=registry)
    series = _Series(gauge)
    series.set({("a",): 1.0, ("b",): 2.0})
    series.set({("b",): 3.0})
    assert registry.get_sample_value("karpy_test_series", {"provisioner": "a"}) is None
    assert registry.get_sample_value("karpy_test_series", {"provisioner": "b"}) == 3.0


def test_disruption_decisions_count_performed_failed_and_refuse_unknown_labels() -> None:
    def decisions(outcome: str) -> float:
        return sample("karpy_disruption_decisions_total", reason="drifted", outcome=outcome)

    before = decisions("performed"), decisions("failed")
    with lifecycle_metrics.disrupting("drifted"):
        pass
    with pytest.raises(RuntimeError), lifecycle_metrics.disrupting("drifted"):
        raise RuntimeError("API server down")
    assert (decisions("performed"), decisions("failed")) == (before[0] + 1, before[1] + 1)
    with pytest.raises(ValueError, match="documented labels"):
        lifecycle_metrics.disruption("bored", "performed")


def test_an_empty_node_blocked_by_its_budget_is_a_blocked_decision(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(emptiness.nodepatch, "pods_on_node", lambda _kube, _node: [])
    # The mark's disrupted taint (plain data here; its patches are proven in tests/integration).
    monkeypatch.setattr(emptiness.nodepatch, "add_taint", lambda _kube, _name, _taint: True)
    monkeypatch.setattr(emptiness.nodepatch, "drop_taint", lambda _kube, _name, _key: True)
    monkeypatch.setattr(emptiness.nodepatch, "delete_node", lambda _kube, _name: None)
    ctx = Context(
        settings=Settings(),
        kube=None,
        cloud=None,  # type: ignore[arg-type]
        state=ClusterState(),
        provisioning=None,
        recorder=None,  # type: ignore[arg-type]
    )
    ctx.clock = lambda: T0 + timedelta(seconds=60)
    due = node(annotations={labels.EMPTINESS_TIMESTAMP_ANNOTATION: stamp(T0)})
    blocked = sample("karpy_disruption_decisions_total", reason="empty", outcome="blocked")
    performed = sample("karpy_disruption_decisions_total", reason="empty", outcome="performed")
    assert emptiness.reconcile(ctx, due, [], 30, admit=lambda: False) == emptiness.BUDGET_POLL_SECONDS
    assert sample("karpy_disruption_decisions_total", reason="empty", outcome="blocked") == blocked + 1
    emptiness.reconcile(ctx, due, [], 30, admit=lambda: True)
    assert sample("karpy_disruption_decisions_total", reason="empty", outcome="performed") == performed + 1


def test_extender_bad_requests_and_failures_are_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    from extender.http import app as extender_app

    client = extender_app.create_app(Settings(), ClusterState(), lambda _pods: None).test_client()

    def errors(verb: str, reason: str) -> float:
        return sample("karpy_extender_errors_total", verb=verb, reason=reason)

    before = errors("filter", "bad_request"), errors("prioritize", "exception")
    assert "bad request" in client.post("/filter", data="[]").json["Error"]

    def broken(*_args: Any) -> Any:
        raise RuntimeError("a bug")

    # has_preference runs on every /prioritize call (the scores only when it says so).
    monkeypatch.setattr(extender_app.guard, "has_preference", broken)
    assert client.post("/prioritize", json={"Pod": {}, "NodeNames": []}).status_code == 500
    assert (errors("filter", "bad_request"), errors("prioritize", "exception")) == (
        before[0] + 1,
        before[1] + 1,
    )
