"""coordination.k8s.io/v1 Lease reads and writes for leader election, as API JSON.

Writes carry the resourceVersion that was read, so two replicas racing for the same Lease cannot
both win: the loser gets 409 Conflict, reported here as None. Other failures raise ClusterError.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client

from extender.cluster.client import call_json
from extender.cluster.errors import AlreadyExists, Conflict, NotFound, translated


def _api(kube: Any) -> Any:
    return client.CoordinationV1Api(kube)


def get(kube: Any, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        with translated(f"reading lease {namespace}/{name}"):
            lease: dict[str, Any] = call_json(_api(kube).read_namespaced_lease, name, namespace)
    except NotFound:
        return None
    return lease


def create(kube: Any, namespace: str, name: str, spec: dict[str, Any]) -> dict[str, Any] | None:
    body = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
    try:
        with translated(f"creating lease {namespace}/{name}"):
            created: dict[str, Any] = call_json(_api(kube).create_namespaced_lease, namespace, body)
    except (AlreadyExists, Conflict):
        return None
    return created


def update(kube: Any, lease: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any] | None:
    """Replace the spec of `lease` (as read, with its resourceVersion); None when someone wrote first."""
    meta = lease["metadata"]
    body = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "resourceVersion": meta["resourceVersion"],
        },
        "spec": spec,
    }
    try:
        with translated(f"updating lease {meta['namespace']}/{meta['name']}"):
            updated: dict[str, Any] = call_json(
                _api(kube).replace_namespaced_lease, meta["name"], meta["namespace"], body
            )
    except (Conflict, AlreadyExists, NotFound):
        return None
    return updated
