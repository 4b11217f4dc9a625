"""Which pods are provisionable, and the watcher's bookkeeping of events."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from extender.provisioning.watcher import PodWatcher, is_provisionable
from tests import builders

UNSCHEDULABLE = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/0 nodes"}


def pod(name: str = "p", **changes: Any) -> dict[str, Any]:
    manifest = builders.pod_manifest(
        name, namespace="ns", uid="", status={"phase": "Pending", "conditions": [dict(UNSCHEDULABLE)]}
    )
    manifest["metadata"]["resourceVersion"] = "7"
    for path, value in changes.items():
        section, key = path.split("__")
        manifest[section][key] = value
    return manifest


def test_unschedulable_pending_pod_is_provisionable() -> None:
    assert is_provisionable(pod())


@pytest.mark.parametrize(
    "manifest",
    [
        pod(spec__nodeName="n1"),
        pod(status__nominatedNodeName="n1"),
        pod(metadata__deletionTimestamp="2026-01-01T00:00:00Z"),
        pod(metadata__ownerReferences=[{"kind": "DaemonSet", "name": "ds"}]),
        pod(metadata__ownerReferences=[{"kind": "Node", "name": "n1"}]),
        pod(status__phase="Succeeded"),
        pod(status__conditions=[{**UNSCHEDULABLE, "reason": "SchedulingGated"}]),
        pod(status__conditions=[{**UNSCHEDULABLE, "reason": "SchedulerError"}]),
        pod(status__conditions=[]),
    ],
    ids=["bound", "nominated", "terminating", "daemonset", "static", "done", "gated", "error", "new"],
)
def test_not_provisionable(manifest: dict[str, Any]) -> None:
    assert not is_provisionable(manifest)


def test_owned_by_replicaset_is_provisionable() -> None:
    assert is_provisionable(pod(metadata__ownerReferences=[{"kind": "ReplicaSet", "name": "rs"}]))


def test_events_track_pending_set_and_resource_version() -> None:
    seen: list[dict[str, Any]] = []
    watcher = PodWatcher(kube=None, on_pods=seen.append)  # type: ignore[arg-type]
    watcher.handle("ADDED", pod("a"))
    assert list(watcher.pending()) == ["ns/a"] and seen == [{"ns/a": pod("a")}]
    bound = copy.deepcopy(pod("a"))
    bound["spec"]["nodeName"] = "n1"
    bound["metadata"]["resourceVersion"] = "9"
    watcher.handle("MODIFIED", bound)
    assert watcher.pending() == {} and watcher.resource_version == "9"
    watcher.handle("BOOKMARK", {"metadata": {"resourceVersion": "12"}})
    assert watcher.resource_version == "12" and len(seen) == 1
    watcher.handle("ADDED", pod("b"))
    watcher.handle("DELETED", pod("b"))
    assert watcher.pending() == {}
