"""Evict one pod through the policy/v1 Eviction subresource, mapping the answers the drain cares about.

The API server enforces PodDisruptionBudgets: 429 means the budget allows no disruption now, 500
means the pod matches more than one PDB. Both are retried by the caller with backoff; 404 means the
pod is already gone, 409 that it was replaced (UID precondition) — both count as evicted.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from kubernetes import client

from extender.cluster.client import call_json
from extender.cluster.errors import AlreadyExists, ClusterError, Conflict, NotFound, Throttled, translated


class Outcome(Enum):
    EVICTED = "evicted"
    GONE = "gone"
    PDB_VIOLATION = "pdb"
    PDB_MISCONFIGURED = "pdb-misconfigured"
    ERROR = "error"


def evict(kube: Any, namespace: str, name: str, uid: str = "") -> tuple[Outcome, str]:
    """POST /api/v1/namespaces/{ns}/pods/{name}/eviction; returns (outcome, server message)."""
    body: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
    }
    if uid:
        body["deleteOptions"] = {"preconditions": {"uid": uid}}
    try:
        with translated(""):  # the outcome's message is the server's alone
            call_json(client.CoreV1Api(kube).create_namespaced_pod_eviction, name, namespace, body)
    except ClusterError as err:
        if err.status == 0:  # no answer at all: the caller's retry decides
            raise
        return _classify(err)
    return Outcome.EVICTED, ""


def _classify(err: ClusterError) -> tuple[Outcome, str]:
    message = _message(err)
    if isinstance(err, NotFound | Conflict | AlreadyExists):
        return Outcome.GONE, message
    if isinstance(err, Throttled):
        return Outcome.PDB_VIOLATION, message
    if err.status == 500:
        return Outcome.PDB_MISCONFIGURED, message
    return Outcome.ERROR, f"{err.status} {message}"


def _message(err: ClusterError) -> str:
    """The server's message: what `translate` put after ": <status> "."""
    text = str(err)
    prefix = f": {err.status} "
    return text[len(prefix) :] if text.startswith(prefix) else text


def delete(kube: Any, namespace: str, name: str, uid: str, grace_seconds: int) -> tuple[Outcome, str]:
    """DELETE the pod with `gracePeriodSeconds` (no PDB is consulted): a drain's deadline. A grace
    of at least 1 s keeps it a graceful deletion (0 would remove it from etcd at once, breaking the
    at-most-one-pod guarantee), as Karpenter's forceDelete clamps it."""
    body: dict[str, Any] = {"gracePeriodSeconds": max(grace_seconds, 1)}
    if uid:
        body["preconditions"] = {"uid": uid}
    try:
        with translated(""):
            call_json(client.CoreV1Api(kube).delete_namespaced_pod, name, namespace, body=body)
    except ClusterError as err:
        if err.status == 0:
            raise
        outcome, message = _classify(err)
        return (outcome if outcome is Outcome.GONE else Outcome.ERROR), message
    return Outcome.EVICTED, ""
