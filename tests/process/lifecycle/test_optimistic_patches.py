"""Node patches retried with a fresh read on 409/422; the leader label retried until it lands
(issue 13, Found 8: a benign 422 on a taint removal was an ERROR with a traceback, and a failed
leader-label patch was never retried). Every test here failed before the fix."""

from __future__ import annotations

import copy
import logging
import threading
import time
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from extender.api import labels
from extender.api.node import Node
from extender.cluster import leaderlabel
from extender.lifecycle import nodepatch
from extender.retry import LoopBackoff
from tests.builders import node, node_manifest

NOT_READY = {"key": labels.NOT_READY_TAINT_KEY, "effect": "NoSchedule"}
OTHER = {"key": "example.com/other", "effect": "NoSchedule"}


class FakeNodes:
    """`_patch` applies a JSON patch to the stored node, all or nothing; it fails with `status` when a
    `test` op does not match."""

    def __init__(self, stored: dict[str, Any], status: int = 422) -> None:
        self.stored = stored
        self.status = status
        self.patches: list[Any] = []

    def patch(self, _kube: Any, _name: str, body: Any, _content_type: str) -> None:
        self.patches.append(body)
        doc = copy.deepcopy(self.stored)
        for op in body:
            *parents, last = op["path"].strip("/").split("/")
            target: Any = doc
            for part in parents:
                target = target[int(part)] if isinstance(target, list) else target.get(part)
            key: Any = int(last) if isinstance(target, list) else last
            if op["op"] == "test":
                found = target[key] if isinstance(target, list) and key < len(target) else None
                if not isinstance(target, list):
                    found = target.get(key)
                if found != op["value"]:
                    raise ApiException(status=self.status, reason="Invalid")
            elif op["op"] == "remove":
                del target[key]
            else:
                target[key] = op["value"]
        self.stored = doc

    def get(self, _kube: Any, _name: str) -> Node:
        return Node.from_live(self.stored)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeNodes:
    # The node gained a taint ahead of ours since our copy was read: our `test` op no longer matches.
    stored = node_manifest("n1", taints=[OTHER, NOT_READY])
    fake = FakeNodes(stored)
    monkeypatch.setattr(nodepatch, "_patch", fake.patch)
    monkeypatch.setattr(nodepatch, "get_node", fake.get)
    return fake


@pytest.mark.parametrize("status", [409, 422])
def test_taint_removal_on_a_changed_node_is_retried_quietly_with_a_fresh_read(
    fake: FakeNodes, status: int, caplog: pytest.LogCaptureFixture
) -> None:
    fake.status = status
    stale = node("n1", taints=[NOT_READY])
    with caplog.at_level(logging.DEBUG):
        nodepatch.remove_taint(None, stale, labels.NOT_READY_TAINT_KEY)
    assert fake.stored["spec"]["taints"] == [OTHER]
    assert len(fake.patches) == 2
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_taint_already_gone_in_the_fresh_read_needs_no_second_patch(fake: FakeNodes) -> None:
    fake.stored["spec"]["taints"] = [OTHER]
    nodepatch.remove_taint(None, node("n1", taints=[NOT_READY]), labels.NOT_READY_TAINT_KEY)
    assert len(fake.patches) == 1 and fake.stored["spec"]["taints"] == [OTHER]


def test_finalizer_added_on_a_changed_node_keeps_the_other_writers_finalizer(fake: FakeNodes) -> None:
    fake.stored["metadata"].update(finalizers=["example.com/theirs"], resourceVersion="8")
    stale = node_manifest("n1")
    stale["metadata"].update(finalizers=[], resourceVersion="7")
    assert nodepatch.ensure_finalizer(None, Node.from_live(stale), labels.TERMINATION_FINALIZER)
    assert fake.stored["metadata"]["finalizers"] == ["example.com/theirs", labels.TERMINATION_FINALIZER]


def test_leader_label_patch_is_retried_until_it_lands(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []

    def flaky(_fn: Any, _pod: str, _ns: str, body: Any, **_kwargs: Any) -> dict[str, Any]:
        calls.append(body["metadata"]["labels"][leaderlabel.LEADER_LABEL])
        if len(calls) <= 2:
            raise ApiException(status=503, reason="Service Unavailable")
        return {}

    monkeypatch.setattr(leaderlabel, "call_json", flaky)
    monkeypatch.setattr(
        leaderlabel.client, "CoreV1Api", lambda _kube: type("Api", (), {"patch_namespaced_pod": None})()
    )
    label = leaderlabel.LeaderLabel(
        None, "karpy", "karpy-controller-0", backoff=LoopBackoff(rand=lambda: 0.0)
    )
    assert label.set(True) is False
    deadline = time.monotonic() + 10
    retrying = [t for t in threading.enumerate() if t.name == "leader-label-retry"]
    while (len(calls) < 3 or any(t.is_alive() for t in retrying)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert calls == ["true", "true", "true"]
    assert not [t for t in threading.enumerate() if t.name == "leader-label-retry" and t.is_alive()]
