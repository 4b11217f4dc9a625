"""v1 disruption controls over the internal model: budgets by reason and schedule (Karpenter
pkg/apis/v1/nodepool.go GetAllowedDisruptionsByReason and its nodepool_budgets_test.go cases),
consolidateAfter, karpenter.sh/do-not-disrupt, and terminationGracePeriod's drain deadline
(Karpenter node/termination/terminator eviction.go needsForceDelete)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from extender.api.disruption import DO_NOT_DISRUPT, Budget
from extender.api.provisioner import Provisioner
from extender.lifecycle import budgets, emptiness, protection
from extender.lifecycle.budgets import EMPTY, EXPIRED, UNDERUTILIZED, UNLIMITED, allowed_by_reason
from extender.lifecycle.consolidation.decide import Method, decide
from extender.lifecycle.consolidation.eligibility import free_slots, node_blocker
from extender.lifecycle.consolidation.view import Settings
from extender.lifecycle.podevents import PodEvents
from extender.lifecycle.termination import deadline_of, needs_force_delete, plan_drain
from tests.builders import T0, node, running_pod, stamp

from . import test_consolidation as tc

MIDNIGHT = datetime(2024, 5, 1, tzinfo=UTC)
DRIFTED = budgets.DRIFTED


def pool(*budget_list: Budget, **fields: object) -> Provisioner:
    return dataclasses.replace(Provisioner("p", kind="NodePool"), budgets=budget_list, **fields)  # type: ignore[arg-type]


# --- budgets ------------------------------------------------------------------------------------------


def test_minimum_of_the_budgets_that_apply() -> None:
    """nodepool_budgets_test.go: "should return the minimum allowed disruptions" across budgets,
    only those whose reasons hold the reason (or have none)."""
    p = pool(
        Budget("20%", reasons=frozenset({EMPTY, DRIFTED})),
        Budget("5"),
        Budget("0", reasons=frozenset({UNDERUTILIZED})),
    )
    assert allowed_by_reason(p, EMPTY, 100, MIDNIGHT) == 5
    assert allowed_by_reason(p, DRIFTED, 10, MIDNIGHT) == 2
    assert allowed_by_reason(p, UNDERUTILIZED, 100, MIDNIGHT) == 0


def test_no_budget_applies_is_unlimited_and_expiry_is_never_budgeted() -> None:
    """GetAllowedDisruptionsByReason starts at MaxInt32; v1's expiration is forceful."""
    p = pool(Budget("0", reasons=frozenset({DRIFTED})))
    assert allowed_by_reason(p, EMPTY, 10, MIDNIGHT) == UNLIMITED
    assert allowed_by_reason(pool(Budget("0")), EXPIRED, 10, MIDNIGHT) == UNLIMITED


def test_v1alpha5_single_budget_counts_for_every_reason() -> None:
    legacy = Provisioner("p", budgets=(Budget("1"),))  # as a v1alpha5 `disruption: {nodes: "1"}` loads
    assert {r: allowed_by_reason(legacy, r, 10, MIDNIGHT) for r in (EMPTY, DRIFTED, EXPIRED)} == {
        EMPTY: 1,
        DRIFTED: 1,
        EXPIRED: 1,
    }


def test_scheduled_budget_applies_only_inside_its_window() -> None:
    """Budget.IsActive: {nodes: 0, schedule: @daily, duration: 10m} blocks 00:00-00:10 UTC only."""
    p = pool(Budget("10%"), Budget("0", schedule="@daily", duration=600))
    assert allowed_by_reason(p, UNDERUTILIZED, 10, MIDNIGHT + timedelta(minutes=5)) == 0
    assert allowed_by_reason(p, UNDERUTILIZED, 10, MIDNIGHT + timedelta(minutes=10)) == 1
    assert allowed_by_reason(p, UNDERUTILIZED, 10, MIDNIGHT - timedelta(seconds=1)) == 1
    # an unknown time (a view without one) fails closed
    assert allowed_by_reason(p, UNDERUTILIZED, 10, None) == 0


def test_unparsable_schedule_fails_closed() -> None:
    """Budget.GetAllowedDisruptions: a cron error allows 0."""
    assert (
        allowed_by_reason(pool(Budget("100%", schedule="61 * * * *", duration=60)), EMPTY, 4, MIDNIGHT) == 0
    )


def test_consolidation_uses_the_reason_of_each_move() -> None:
    """Empty nodes count against Empty budgets, every other move against Underutilized."""
    under_blocked = dataclasses.replace(
        tc.provisioner(), budgets=(Budget("0", reasons=frozenset({UNDERUTILIZED})),)
    )
    empty = tc.node("idle", "m5.large", [])
    busy = [tc.node(f"b{i}", "m5.2xlarge", tc.pods(f"p{i}", 1)) for i in range(2)]
    view = tc.view(empty, *busy, provisioners=(under_blocked,), now=MIDNIGHT)
    assert free_slots(view, EMPTY) == {"default": UNLIMITED}
    assert free_slots(view, UNDERUTILIZED) == {"default": 0}
    action = decide(view)
    assert action is not None and action.method is Method.EMPTY and action.names == ("idle",)
    assert decide(tc.view(*busy, provisioners=(under_blocked,), now=MIDNIGHT)) is None
    # without the budget the two half-used nodes merge
    assert decide(tc.view(*busy, now=MIDNIGHT)) is not None


# --- consolidateAfter and do-not-disrupt ------------------------------------------------------------


def test_consolidate_after_waits_on_the_last_pod_event() -> None:
    """nodeclaim/disruption/consolidation.go: Consolidatable once lastPodEventTime is consolidateAfter old."""
    prov = dataclasses.replace(tc.provisioner(), kind="NodePool", consolidate_after=300)
    settings = Settings()
    fresh = tc.node("n", "m5.large", [], idle_seconds=299.0)
    ripe = tc.node("n", "m5.large", [], idle_seconds=300.0)
    assert "consolidateAfter" in (node_blocker(fresh, tc.view(fresh, provisioners=(prov,)), settings) or "")
    assert node_blocker(ripe, tc.view(ripe, provisioners=(prov,)), settings) is None
    never = dataclasses.replace(prov, consolidate_after=None)
    assert "Never" in (node_blocker(ripe, tc.view(ripe, provisioners=(never,)), settings) or "")
    # a v1alpha5 Provisioner has no consolidateAfter and waits for nothing
    legacy = tc.node("n", "m5.large", [], idle_seconds=None)
    assert node_blocker(legacy, tc.view(legacy), settings) is None


def test_pod_events_are_binds_terminal_terminating_and_deletes() -> None:
    """podevents/controller.go's predicate: bound, went terminal, went terminating; DaemonSet pods
    and unchanged status updates do not count; a listing (SYNC) records without an event."""
    now = [T0]
    events = PodEvents(lambda: now[0])
    events.observe("SYNC", running_pod("old"))
    assert events.last(["n1"]) == {"n1": T0}  # first asked about at T0
    now[0] = T0 + timedelta(minutes=1)
    events.observe("MODIFIED", running_pod("old"))  # nothing the predicate watches changed
    events.observe("ADDED", running_pod("ds", owner="DaemonSet"))
    assert events.last(["n1"]) == {"n1": T0}
    events.observe("ADDED", running_pod("new"))
    assert events.last(["n1"]) == {"n1": now[0]}
    now[0] += timedelta(minutes=1)
    events.observe("MODIFIED", running_pod("new", deleted_at=now[0]))
    assert events.last(["n1"]) == {"n1": now[0]}


@pytest.mark.parametrize(
    ("node_annotations", "pod_annotations", "blocked"),
    [
        ({DO_NOT_DISRUPT: "true"}, {}, "node has karpenter.sh/do-not-disrupt annotation"),
        ({}, {DO_NOT_DISRUPT: "true"}, "pod default/p1 has karpenter.sh/do-not-disrupt annotation"),
        ({}, {"karpenter.sh/do-not-evict": "true"}, "pod default/p1 has do-not-evict annotation"),
        ({DO_NOT_DISRUPT: "false"}, {DO_NOT_DISRUPT: "false"}, None),
    ],
)
def test_do_not_disrupt_on_node_or_pod(
    node_annotations: dict[str, str], pod_annotations: dict[str, str], blocked: str | None
) -> None:
    """Karpenter v1 docs concepts/disruption, Pod-Level and Node-Level Controls (value "true")."""
    assert protection.node_blocker(node_annotations, [running_pod(annotations=pod_annotations)]) == blocked


def test_do_not_disrupt_daemonset_pod_does_not_hold_the_node() -> None:
    assert (
        protection.node_blocker({}, [running_pod(owner="DaemonSet", annotations={DO_NOT_DISRUPT: "true"})])
        is None
    )


def test_consolidation_skips_do_not_disrupt_nodes_and_pods() -> None:
    settings = Settings()
    marked = tc.node("n", "m5.large", [], do_not_disrupt=True)
    assert node_blocker(marked, tc.view(marked), settings) == f"node has {DO_NOT_DISRUPT} annotation"
    held = tc.node("h", "m5.large", [tc.pod("keep", annotations={DO_NOT_DISRUPT: "true"})])
    assert node_blocker(held, tc.view(held), settings) == f"pod default/keep has {DO_NOT_DISRUPT} annotation"


def test_empty_node_annotated_do_not_disrupt_outlives_its_ttl() -> None:
    annotations = {"karpenter.sh/emptiness-timestamp": stamp(T0)}
    due = node(annotations=annotations)
    kept = node(annotations={**annotations, DO_NOT_DISRUPT: "true"})
    later = T0 + timedelta(seconds=60)
    assert emptiness.decide(due, [], 30, later).action is emptiness.Action.TERMINATE
    assert emptiness.decide(kept, [], 30, later).action is emptiness.Action.NONE
    # Counted as a blocked disruption decision (karpy_disruption_decisions_total{outcome="blocked"}).
    assert emptiness.decide(kept, [], 30, later).blocked == f"node has {DO_NOT_DISRUPT} annotation"
    assert emptiness.decide(due, [], 30, later).blocked is None


# --- terminationGracePeriod -------------------------------------------------------------------------


def _with_grace(name: str, grace: int, **kw: object) -> object:
    return dataclasses.replace(running_pod(name, **kw), grace_seconds=grace)  # type: ignore[arg-type]


def test_drain_deadline_is_deletion_plus_grace_period() -> None:
    deleting = node(deleting=True)
    assert deleting.deleted_at is not None
    assert deadline_of(deleting, 120) == deleting.deleted_at + timedelta(seconds=120)
    assert deadline_of(deleting, None) is None
    assert deadline_of(node(), 120) is None


def test_blocked_pods_are_deleted_so_they_end_by_the_deadline() -> None:
    """needsForceDelete: now after deadline - the pod's terminationGracePeriodSeconds; a terminating
    pod whose deletionTimestamp is past the deadline is deleted again."""
    deadline = T0 + timedelta(minutes=5)
    pinned = _with_grace("pinned", 30, annotations={DO_NOT_DISRUPT: "true"})
    web = _with_grace("web", 60)
    before = plan_drain([pinned, web], deadline - timedelta(seconds=61), 3600, deadline)  # type: ignore[list-item]
    assert before.force == () and [p.name for p in before.blocking] == ["pinned"]
    assert before.next_force == deadline - timedelta(seconds=60)
    mid = plan_drain([pinned, web], deadline - timedelta(seconds=45), 3600, deadline)  # type: ignore[list-item]
    assert [p.name for p in mid.force] == ["web"] and [p.name for p in mid.blocking] == ["pinned"]
    after = plan_drain([pinned, web], deadline - timedelta(seconds=29), 3600, deadline)  # type: ignore[list-item]
    assert {p.name for p in after.force} == {"pinned", "web"} and not after.blocking
    late = running_pod("late", deleted_at=deadline + timedelta(seconds=10))
    assert needs_force_delete(late, deadline, T0)
    assert not needs_force_delete(running_pod("soon", deleted_at=deadline), deadline, T0)
    # past the deadline, a pod ending within a second is not deleted again (no shorter grace exists)
    assert not needs_force_delete(late, deadline, deadline + timedelta(seconds=9))
    # no terminationGracePeriod: a blocked drain waits for ever
    assert plan_drain([pinned], deadline + timedelta(days=1), 10**9).force == ()  # type: ignore[list-item]
