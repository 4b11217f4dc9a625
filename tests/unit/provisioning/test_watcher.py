"""Which pods are provisionable, and the watcher's bookkeeping of events."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from functools import partial
from typing import Any

import pytest

from extender.provisioning.watcher import PodWatcher, is_provisionable
from tests import builders

UNSCHEDULABLE = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/0 nodes"}


#: A pod kube-scheduler left Pending as Unschedulable; keywords as tests.builders.pod_manifest.
pending = partial(
    builders.pod_manifest,
    name="p",
    namespace="ns",
    uid="",
    resource_version="7",
    phase="Pending",
    conditions=[UNSCHEDULABLE],
)


def test_unschedulable_pending_pod_is_provisionable() -> None:
    assert is_provisionable(pending())


@pytest.mark.parametrize(
    "manifest",
    [
        pending(node_name="n1"),
        pending(status={"nominatedNodeName": "n1"}),
        pending(deleted_at=datetime(2026, 1, 1, tzinfo=UTC)),
        pending(owners=[{"kind": "DaemonSet", "name": "ds"}]),
        pending(owners=[{"kind": "Node", "name": "n1"}]),
        pending(phase="Succeeded"),
        pending(conditions=[{**UNSCHEDULABLE, "reason": "SchedulingGated"}]),
        pending(conditions=[{**UNSCHEDULABLE, "reason": "SchedulerError"}]),
        pending(conditions=[]),
    ],
    ids=["bound", "nominated", "terminating", "daemonset", "static", "done", "gated", "error", "new"],
)
def test_not_provisionable(manifest: dict[str, Any]) -> None:
    assert not is_provisionable(manifest)


def test_owned_by_replicaset_is_provisionable() -> None:
    assert is_provisionable(pending(owners=[{"kind": "ReplicaSet", "name": "rs"}]))


def test_events_track_pending_set_and_resource_version() -> None:
    seen: list[dict[str, Any]] = []
    watcher = PodWatcher(kube=None, on_pods=seen.append)  # type: ignore[arg-type]
    watcher.handle("ADDED", pending(name="a"))
    assert list(watcher.pending()) == ["ns/a"] and seen == [{"ns/a": pending(name="a")}]
    bound = copy.deepcopy(pending(name="a"))
    bound["spec"]["nodeName"] = "n1"
    bound["metadata"]["resourceVersion"] = "9"
    watcher.handle("MODIFIED", bound)
    assert watcher.pending() == {} and watcher.resource_version == "9"
    watcher.handle("BOOKMARK", {"metadata": {"resourceVersion": "12"}})
    assert watcher.resource_version == "12" and len(seen) == 1
    watcher.handle("ADDED", pending(name="b"))
    watcher.handle("DELETED", pending(name="b"))
    assert watcher.pending() == {}
