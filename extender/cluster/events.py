"""Record a core/v1 Event about any object; best effort (an Event is never worth failing a launch)."""

from __future__ import annotations

import hashlib
import logging
import uuid
from datetime import UTC, datetime
from typing import Any

from kubernetes import client

from extender.cluster.client import call_json
from extender.cluster.errors import ClusterError, translated

log = logging.getLogger("karpy.events")

COMPONENT = "karpy"


def record(
    kube: client.ApiClient,
    *,
    kind: str,
    name: str,
    namespace: str = "",
    uid: str = "",
    api_version: str = "v1",
    reason: str,
    message: str,
    warning: bool = False,
) -> None:
    """Create the Event; cluster-scoped objects get theirs in `default`, as kubectl describe expects."""
    event_namespace = namespace or "default"
    involved = {"apiVersion": api_version, "kind": kind, "name": name, "namespace": namespace, "uid": uid}
    body = _event(f"{name}.{uuid.uuid4().hex[:16]}", event_namespace, involved, reason, message, warning)
    try:
        with translated(f"recording event {reason} for {kind} {name}"):
            call_json(client.CoreV1Api(kube).create_namespaced_event, event_namespace, body)
    except ClusterError as err:  # see module docstring
        log.debug("Failed to record event %s for %s %s, %s", reason, kind, name, err)


def record_counted(
    kube: client.ApiClient,
    *,
    kind: str,
    name: str,
    namespace: str,
    uid: str,
    reason: str,
    message: str,
    warning: bool = True,
) -> None:
    """One Event per object and reason, its count and lastTimestamp raised on each repeat (as
    kube-scheduler's FailedScheduling through client-go's EventCorrelator) rather than a new
    object per retry. The name is derived from the object's uid and the reason, so a restarted
    controller finds the same Event."""
    event_namespace = namespace or "default"
    digest = hashlib.sha256(f"{uid or name}/{reason}".encode()).hexdigest()[:16]
    event_name = f"{name}.{digest}"
    core = client.CoreV1Api(kube)
    involved = {"apiVersion": "v1", "kind": kind, "name": name, "namespace": namespace, "uid": uid}
    body = _event(event_name, event_namespace, involved, reason, message, warning)
    try:
        with translated(f"recording event {reason} for {kind} {name}"):
            try:
                call_json(core.create_namespaced_event, event_namespace, body)
                return
            except client.ApiException as err:
                if err.status != 409:
                    raise
            found = call_json(core.read_namespaced_event, event_name, event_namespace)
            patch = {
                "count": int(found.get("count") or 1) + 1,
                "lastTimestamp": body["lastTimestamp"],
                "message": body["message"],
            }
            call_json(core.patch_namespaced_event, event_name, event_namespace, patch)
    except ClusterError as err:  # see module docstring
        log.debug("Failed to record event %s for %s %s, %s", reason, kind, name, err)


def _event(
    name: str, namespace: str, involved: dict[str, str], reason: str, message: str, warning: bool
) -> dict[str, Any]:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": namespace},
        "involvedObject": involved,
        "reason": reason,
        "message": message[:1024],
        "type": "Warning" if warning else "Normal",
        "source": {"component": COMPONENT},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
