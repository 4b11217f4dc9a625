"""Readiness tells provisioning when a node of a pool joins or never does (issue 35: launch and
registration health; Karpenter's nodeclaim liveness sets the NodePool's NodeRegistrationHealthy)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from extender.api.node import Node
from extender.cloud.fake import FakeCloudProvider
from extender.lifecycle import readiness
from extender.lifecycle.context import Context
from extender.lifecycle.events import Recorder
from extender.settings import Settings
from tests.builders import T0, node_manifest
from tests.unit.scheduling.builders import catalog, make_provisioner


class Told:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def registration_failed(self, pool: Any, message: str) -> None:
        self.calls.append(("failed", f"{pool.name}: {message}"))

    def joined(self, pool: Any) -> None:
        self.calls.append(("joined", pool.name))


def context(told: Told, now: Any) -> Context:
    return Context(
        settings=Settings(),
        kube=None,
        cloud=FakeCloudProvider(catalog=catalog()),
        state=None,
        provisioning=told,  # type: ignore[arg-type]
        recorder=Recorder(None),
        clock=lambda: now,
    )


def test_a_node_that_never_joined_reports_its_pools_registration_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(readiness.nodepatch, "delete_node", lambda kube, name: None)
    told = Told()
    node = Node.from_live(node_manifest("n1", ready=None, created=T0))
    readiness.reconcile(context(told, T0 + timedelta(seconds=901)), node, make_provisioner("web"))
    assert told.calls == [("failed", "web: node n1 did not become Ready within 900s of its creation")]


def test_a_node_that_joins_lifts_its_pools_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(readiness.nodepatch, "remove_taint", lambda kube, node, key: None)
    told = Told()
    taint = [{"key": "karpenter.sh/not-ready", "effect": "NoSchedule"}]
    node = Node.from_live(node_manifest("n1", taints=taint))
    readiness.reconcile(context(told, T0), node, make_provisioner("web"))
    assert told.calls == [("joined", "web")]
