"""Pure lifecycle decisions on plain API JSON with an injected clock."""

from __future__ import annotations

from datetime import timedelta

from extender.api import labels
from extender.cluster.nodes import instance_id
from extender.lifecycle import emptiness, expiry, readiness
from extender.lifecycle.context import go_duration
from extender.lifecycle.emptiness import Action
from tests.builders import T0, node, running_pod, stamp

NOT_READY = {"key": labels.NOT_READY_TAINT_KEY, "effect": "NoSchedule"}
TS = labels.EMPTINESS_TIMESTAMP_ANNOTATION


# --- emptiness ---------------------------------------------------------------------------------------


def test_empty_ready_node_gets_timestamp_and_requeue_at_ttl() -> None:
    d = emptiness.decide(node(), [running_pod(owner="DaemonSet"), running_pod("m", owner="Node")], 30, T0)
    assert d == emptiness.Decision(Action.ADD, requeue_after=30)


def test_pod_arriving_removes_timestamp() -> None:
    n = node(annotations={TS: stamp(T0)})
    assert emptiness.decide(n, [running_pod()], 30, T0).action is Action.REMOVE


def test_completed_pods_do_not_keep_a_node_busy() -> None:
    assert emptiness.decide(node(), [running_pod(phase="Succeeded")], 30, T0).action is Action.ADD


def test_not_yet_due_requeues_exactly_at_due_time() -> None:
    n = node(annotations={TS: stamp(T0)})
    d = emptiness.decide(n, [], 30, T0 + timedelta(seconds=12))
    assert d == emptiness.Decision(Action.NONE, requeue_after=18.0)


def test_due_node_is_terminated() -> None:
    n = node(annotations={TS: stamp(T0)})
    assert emptiness.decide(n, [], 30, T0 + timedelta(seconds=30)).action is Action.TERMINATE


def test_not_ready_or_deleting_or_no_ttl_is_left_alone() -> None:
    assert emptiness.decide(node(ready=False), [], 30, T0).action is Action.NONE
    assert emptiness.decide(node(deleting=True), [], 30, T0).action is Action.NONE
    assert emptiness.decide(node(), [], None, T0).action is Action.NONE


def test_unparseable_timestamp_restarts_the_ttl() -> None:
    assert emptiness.decide(node(annotations={TS: "yesterday"}), [], 30, T0).action is Action.ADD


# --- readiness ---------------------------------------------------------------------------------------


def test_ready_node_loses_not_ready_taint() -> None:
    assert readiness.decide(node(taints=[NOT_READY]), 900, T0).remove_taint
    assert not readiness.decide(node(), 900, T0).remove_taint


def test_never_ready_node_requeues_at_registration_deadline_then_terminates() -> None:
    n = node(ready=None, taints=[NOT_READY])
    assert readiness.decide(n, 900, T0 + timedelta(seconds=600)) == readiness.Decision(requeue_after=300.0)
    assert readiness.decide(n, 900, T0 + timedelta(seconds=900)).terminate


def test_node_that_was_ready_once_is_not_terminated_for_liveness() -> None:
    n = node(ready=False, reason="KubeletNotReady")
    assert readiness.decide(n, 900, T0 + timedelta(hours=1)) == readiness.Decision()


# --- expiry ------------------------------------------------------------------------------------------


def test_expiry_time_is_creation_plus_ttl() -> None:
    assert expiry.expires_at(node(), 3600) == T0 + timedelta(hours=1)
    assert expiry.expires_at(node(), None) is None


def test_pick_starts_oldest_overdue_first_within_free_slots() -> None:
    due = [
        ("young", T0 + timedelta(seconds=50)),
        ("old", T0),
        ("mid", T0 + timedelta(seconds=10)),
        ("future", T0 + timedelta(hours=1)),
    ]
    now = T0 + timedelta(seconds=60)
    assert expiry.pick(due, now, in_flight=0, max_disrupting=2) == ["old", "mid"]
    assert expiry.pick(due, now, in_flight=1, max_disrupting=2) == ["old"]
    assert expiry.pick(due, now, in_flight=2, max_disrupting=2) == []
    assert expiry.pick(due, now, in_flight=0, max_disrupting=10) == ["old", "mid", "young"]


# --- log text and ids ---------------------------------------------------------------------------


def test_instance_id_from_provider_id() -> None:
    assert instance_id("aws:///us-west-2a/i-0abc") == "i-0abc"
    assert instance_id("kwok://node-1") is None
    assert instance_id("") is None


def test_go_duration_matches_karpenter_log_text() -> None:
    assert [go_duration(s) for s in (30, 300, 3725)] == ["30s", "5m0s", "1h2m5s"]


# --- provisioner lookup ------------------------------------------------------------------------------


def test_provisioner_lookup_relists_on_a_miss_but_not_on_every_call() -> None:
    from extender.api.provisioner import default_provisioner
    from extender.lifecycle.pool_lookup import ProvisionerLookup
    from extender.settings import Settings

    names = ["a"]
    calls: list[int] = []

    def lister() -> list:
        calls.append(1)
        return [default_provisioner(n) for n in names]

    now = [0.0]
    lookup = ProvisionerLookup(
        None, settings=Settings(cluster_name="c"), ttl=5.0, clock=lambda: now[0], lister=lister
    )
    assert lookup.get("a") is not None and len(calls) == 1
    names.append("b")
    assert lookup.get("b") is None and len(calls) == 1  # just listed: a miss waits for MISS_RELOAD
    now[0] = 1.0
    assert lookup.get("b") is not None and len(calls) == 2
    assert lookup.get("a") is not None and len(calls) == 2
