"""docs/scheduler-path.md's design on the local control plane + moto: with the shipped scheduler
config (managedResources: karpy.sh/guarded), kube-scheduler keeps ordinary pods off a node karpy is
removing through the node's `karpy.sh/disrupted:NoSchedule` taint, without calling karpy's extender;
the taint goes with the removal mark (lifecycle/context.py), as Karpenter v1's
`karpenter.sh/disrupted:NoSchedule` does, and a taint left without a mark (a restart) is removed.

The provisioning worker and the extender run in this process (the `karpy` fixture); no lifecycle
runs, so the test marks through a lifecycle Context of its own, as the workers do.
"""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import REGISTRY

from extender.api import labels as wk
from extender.api.node import Node
from extender.lifecycle.context import Context
from extender.lifecycle.events import Recorder
from tests.integration.helpers import (
    Karpy,
    all_bound,
    create_pods,
    node_of,
    pod_manifest,
    provisioner,
    unique,
    wait_for,
)

pytestmark = pytest.mark.integration


def filter_calls() -> float:
    """How many /filter requests this process's extender has answered."""
    value = REGISTRY.get_sample_value("karpy_extender_request_duration_seconds_count", {"verb": "filter"})
    return value or 0.0


def disrupted(core: Any, node: str) -> list[tuple[str, str | None, str]]:
    taints = node_of(core, node).spec.taints or []
    return [(t.key, t.value, t.effect) for t in taints if t.key == wk.DISRUPTED_TAINT_KEY]


def lifecycle_context(karpy: Karpy) -> Context:
    return Context(
        settings=karpy.controller.settings,
        kube=karpy.kube,
        cloud=karpy.cloud,
        state=karpy.state,
        provisioning=None,
        recorder=Recorder(karpy.kube),
    )


def test_a_node_being_removed_is_tainted_and_kube_scheduler_keeps_plain_pods_off_without_the_extender(
    karpy: Karpy, core_v1: Any, namespace: str
) -> None:
    name = unique("taint")
    provisioner(karpy.kube, name, [])
    selector = {wk.PROVISIONER_NAME: name}
    create_pods(core_v1, namespace, [pod_manifest("seed", "1", "1Gi", selector=selector)])
    node = wait_for(all_bound(core_v1, namespace, 1), 90, "seed pod bound")[0].spec.node_name
    wait_for(
        lambda: any(
            c.type == "Ready" and c.status == "True" for c in node_of(core_v1, node).status.conditions or []
        ),
        60,
        "node Ready",
    )
    core_v1.patch_node(node, {"spec": {"taints": None}})  # karpy's not-ready taint, as lifecycle drops it
    ctx = lifecycle_context(karpy)
    ctx.mark(node, "empty")
    try:
        assert disrupted(core_v1, node) == [(wk.DISRUPTED_TAINT_KEY, None, "NoSchedule")]
        ctx.mark(node, "terminating")  # marked already: still one taint
        assert len(disrupted(core_v1, node)) == 1
        calls = filter_calls()
        # Room for it on the seed's node, which only the taint keeps it off.
        create_pods(core_v1, namespace, [pod_manifest("late", "100m", selector=selector)])
        late = wait_for(
            lambda: (p := core_v1.read_namespaced_pod("late", namespace)).spec.node_name and p,
            90,
            "late pod bound",
        )
        assert late.spec.node_name != node, "kube-scheduler chose a node marked for removal"
        # Not sent to the extender at all (IsInterested: no karpy.sh/guarded request).
        assert filter_calls() == calls
    finally:
        ctx.unmark(node)
    assert disrupted(core_v1, node) == [] and karpy.state.removal_reason(node) is None


def test_a_disrupted_taint_left_without_a_mark_is_removed(karpy: Karpy, core_v1: Any, namespace: str) -> None:
    """A restarted (or newly elected) controller has no marks: the taint its predecessor left on a
    node it no longer removes would keep pods off for good (Karpenter v1's disruption controller
    removes such taints on every pass)."""
    name = unique("stale")
    provisioner(karpy.kube, name, [])
    create_pods(core_v1, namespace, [pod_manifest("seed", "100m", selector={wk.PROVISIONER_NAME: name})])
    node = wait_for(all_bound(core_v1, namespace, 1), 90, "seed pod bound")[0].spec.node_name
    taints = [
        {"key": t.key, "value": t.value, "effect": t.effect} for t in node_of(core_v1, node).spec.taints or []
    ]
    core_v1.patch_node(
        node, {"spec": {"taints": [*taints, {"key": wk.DISRUPTED_TAINT_KEY, "effect": "NoSchedule"}]}}
    )
    ctx = lifecycle_context(karpy)

    def model() -> Node:
        return Node.from_live(karpy.kube.sanitize_for_serialization(node_of(core_v1, node)))

    karpy.state.mark_for_removal(node, "drifted")
    ctx.release_stale_taint(model())  # marked: kept
    assert len(disrupted(core_v1, node)) == 1
    karpy.state.unmark(node)
    ctx.release_stale_taint(model())
    assert disrupted(core_v1, node) == []

    # The other taints (karpy's not-ready taint among them) are left as they were.
    # kube-controller-manager's own taints (`node.kubernetes.io/not-ready` until it sees the node Ready)
    # come and go on its schedule: compared without them (the CI run of c87e4e3 failed on that race).
    def others(keys: list[str]) -> list[str]:
        return [k for k in keys if not k.startswith("node.kubernetes.io/")]

    left = [t.key for t in node_of(core_v1, node).spec.taints or []]
    assert others(left) == others([t["key"] for t in taints])
