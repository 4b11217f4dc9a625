"""Readiness keeps `karpenter.sh/not-ready` on a Ready node while the provisioning batch that
launched it still binds (ClusterState.binding_to .. batch_done), so kube-scheduler, which in the
shipped configuration does not ask karpy about ordinary pods (docs/scheduler-path.md), places no pod
on the batch's nodes before karpy's own binds; then it lifts the taint as before."""

from __future__ import annotations

import pytest

from extender.api.node import Node
from extender.lifecycle import readiness
from extender.state import ClusterState
from tests.builders import node_manifest
from tests.unit.lifecycle.builders import context
from tests.unit.scheduling.builders import make_provisioner

TAINT = [{"key": "karpenter.sh/not-ready", "effect": "NoSchedule"}]


def test_the_taint_waits_for_the_batch_binding_to_the_node_then_goes(monkeypatch: pytest.MonkeyPatch) -> None:
    removed: list[tuple[str, str]] = []
    monkeypatch.setattr(
        readiness.nodepatch, "remove_taint", lambda _kube, node, key: removed.append((node.name, key))
    )
    state = ClusterState()
    ctx = context(state)
    ready = Node.from_live(node_manifest("n1", taints=TAINT))
    sibling = Node.from_live(node_manifest("n2", taints=TAINT))
    state.binding_to("n1")

    assert readiness.reconcile(ctx, ready, make_provisioner("web")) == readiness.BATCH_BINDING_REQUEUE_SECONDS
    assert removed == []
    # A node the batch does not bind to is not held.
    readiness.reconcile(ctx, sibling, make_provisioner("web"))
    assert removed == [("n2", "karpenter.sh/not-ready")]

    state.batch_done()
    assert readiness.reconcile(ctx, ready, make_provisioner("web")) is None
    assert removed == [("n2", "karpenter.sh/not-ready"), ("n1", "karpenter.sh/not-ready")]
