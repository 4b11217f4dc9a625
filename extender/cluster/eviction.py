"""Evict one pod through the policy/v1 Eviction subresource, mapping the answers the drain cares about.

The API server enforces PodDisruptionBudgets: 429 means the budget allows no disruption now, 500
means the pod matches more than one PDB. Both are retried by the caller with backoff; 404 means the
pod is already gone, 409 that it was replaced (UID precondition) — both count as evicted.
"""

from __future__ import annotations

import json
from enum import Enum
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from extender.cluster.client import call_json


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
        call_json(client.CoreV1Api(kube).create_namespaced_pod_eviction, name, namespace, body)
    except ApiException as err:
        return _classify(err)
    return Outcome.EVICTED, ""


def _classify(err: ApiException) -> tuple[Outcome, str]:
    message = _message(err)
    if err.status in (404, 409):
        return Outcome.GONE, message
    if err.status == 429:
        return Outcome.PDB_VIOLATION, message
    if err.status == 500:
        return Outcome.PDB_MISCONFIGURED, message
    return Outcome.ERROR, f"{err.status} {message}"


def _message(err: ApiException) -> str:
    try:
        return str(json.loads(err.body or "{}").get("message", "")) or str(err.reason or "")
    except ValueError:
        return str(err.body or err.reason or "")
