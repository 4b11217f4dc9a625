"""Nodes and Pods for the lifecycle unit tests: API JSON (`node_manifest`, `pod_manifest`, for fakes
of the API) and the models the lifecycle reads, parsed from it (`node`, `pod`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from extender.api import labels
from extender.api.node import Node
from extender.api.pod import Pod

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def node(name: str = "n1", **kwargs: Any) -> Node:
    return Node.from_live(node_manifest(name, **kwargs))


def pod(name: str = "p1", **kwargs: Any) -> Pod:
    return Pod.from_live(pod_manifest(name, **kwargs))


def node_manifest(
    name: str = "n1",
    *,
    created: datetime = T0,
    ready: bool | None = True,
    reason: str = "KubeletReady",
    taints: list[dict[str, Any]] | None = None,
    annotations: dict[str, str] | None = None,
    instance: str = "i-0001",
    provisioner: str | None = "default",
    deleting: bool = False,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "creationTimestamp": stamp(created),
        "annotations": annotations or {},
        "labels": {},
    }
    if provisioner:
        meta["labels"][labels.PROVISIONER_NAME] = provisioner
    if deleting:
        meta["deletionTimestamp"] = stamp(created)
    conditions = (
        [] if ready is None else [{"type": "Ready", "status": "True" if ready else "False", "reason": reason}]
    )
    return {
        "metadata": meta,
        "spec": {"providerID": f"aws:///us-west-2a/{instance}", "taints": taints or []},
        "status": {"conditions": conditions},
    }


def pod_manifest(
    name: str = "p1",
    *,
    owner: str | None = "ReplicaSet",
    phase: str = "Running",
    priority_class: str | None = None,
    annotations: dict[str, str] | None = None,
    deleting_at: datetime | None = None,
    tolerations: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "default",
        "uid": f"uid-{name}",
        "annotations": annotations or {},
    }
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": "o", "apiVersion": "apps/v1", "uid": "x"}]
    if deleting_at:
        meta["deletionTimestamp"] = stamp(deleting_at)
    spec: dict[str, Any] = {"nodeName": "n1", "tolerations": tolerations or []}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


def eventually(predicate: Callable[[], Any], seconds: float = 30.0) -> bool:
    """Whether `predicate` turns true within `seconds` (for worker threads under test)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return bool(predicate())
