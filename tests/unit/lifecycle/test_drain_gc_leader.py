"""Drain planning, garbage detection, lease acquisition as pure functions."""

from __future__ import annotations

from datetime import timedelta

from extender.api import labels
from extender.cloud.types import Instance
from extender.lifecycle import gc, leader
from extender.lifecycle.termination import plan_drain
from tests.builders import T0, node, running_pod

# --- drain -------------------------------------------------------------------------------------------


def test_non_critical_pods_go_first_critical_wait() -> None:
    pods = [
        running_pod("web"),
        running_pod("dns", priority_class="system-cluster-critical"),
        running_pod("ds", owner="DaemonSet"),
        running_pod("static", owner="Node"),
    ]
    plan = plan_drain(pods, T0, 60)
    assert [p.name for p in plan.evict_now] == ["web"]
    assert plan.waiting == 1 and not plan.drained


def test_critical_pods_are_evicted_once_the_rest_are_gone() -> None:
    pods = [
        running_pod("dns", priority_class="system-cluster-critical"),
        running_pod("proxy", priority_class="system-node-critical"),
        running_pod("ds", owner="DaemonSet"),
    ]
    plan = plan_drain(pods, T0, 60)
    assert [p.name for p in plan.evict_now] == ["dns", "proxy"]


def test_terminating_pods_hold_the_drain_until_stuck() -> None:
    terminating = [running_pod("web", deleted_at=T0)]
    assert plan_drain(terminating, T0 + timedelta(seconds=30), 60).waiting == 1
    assert plan_drain(terminating, T0 + timedelta(seconds=61), 60).drained


def test_do_not_evict_blocks_and_is_never_evicted() -> None:
    plan = plan_drain(
        [running_pod("keep", annotations={labels.DO_NOT_EVICT_ANNOTATION: "true"}), running_pod("web")],
        T0,
        60,
    )
    assert [p.name for p in plan.blocking] == ["keep"]
    assert [p.name for p in plan.evict_now] == ["web"]
    assert not plan.drained


def test_finished_daemonset_and_unschedulable_tolerating_pods_do_not_hold_the_drain() -> None:
    pods = [
        running_pod("done", phase="Succeeded"),
        running_pod("ds", owner="DaemonSet"),
        running_pod("tol", tolerations=[{"operator": "Exists"}]),
    ]
    assert plan_drain(pods, T0, 60).drained


# --- gc ----------------------------------------------------------------------------------------------


def inst(iid: str, launched_ago: float, tags: dict[str, str] | None = None) -> Instance:
    return Instance(
        id=iid,
        instance_type="m5.large",
        zone="us-west-2a",
        capacity_type="spot",
        private_dns_name="",
        provider_id=f"aws:///us-west-2a/{iid}",
        state="running",
        launch_time=T0 - timedelta(seconds=launched_ago),
        tags=tags or {},
    )


def test_instance_without_node_is_garbage_only_after_grace() -> None:
    g = gc.find_garbage(
        [node(instance="i-1")], [inst("i-1", 500), inst("i-2", 500), inst("i-3", 10)], T0, 120
    )
    assert [i.id for i in g.instances] == ["i-2"]
    assert g.nodes == ()


def test_node_whose_instance_is_gone_is_garbage() -> None:
    nodes = [
        node("n1", instance="i-1", created=T0 - timedelta(hours=1)),
        node("n2", instance="i-2", created=T0 - timedelta(hours=1)),
        node("young", instance="i-9", created=T0),
        node("theirs", instance="i-8", provisioner=None, created=T0 - timedelta(hours=1)),
    ]
    g = gc.find_garbage(nodes, [inst("i-1", 3600)], T0, 120)
    assert g.nodes == ("n2",)


def test_protected_instances_are_spared() -> None:
    assert gc.find_garbage([], [inst("i-1", 500)], T0, 120, protected=frozenset({"i-1"})).instances == ()


# --- leader ------------------------------------------------------------------------------------------


def test_may_acquire_free_own_or_expired_lease_only() -> None:
    held = {"holderIdentity": "other", "leaseDurationSeconds": 10}
    assert leader.may_acquire(None, "me", 0.0, 0.0, 10)
    assert leader.may_acquire({"holderIdentity": ""}, "me", 100.0, 100.0, 10)
    assert leader.may_acquire({"holderIdentity": "me"}, "me", 100.0, 100.0, 10)
    assert not leader.may_acquire(held, "me", observed_at=100.0, now=109.9, lease_duration=10)
    assert leader.may_acquire(held, "me", observed_at=100.0, now=110.0, lease_duration=10)
