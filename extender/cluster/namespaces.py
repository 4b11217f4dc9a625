"""Namespace reads: name -> labels, for the namespaceSelector of pod (anti-)affinity terms."""

from __future__ import annotations

from kubernetes import client

from extender.cluster.errors import translated
from extender.cluster.watch import list_objects


def list_labels(kube: client.ApiClient) -> dict[str, dict[str, str]]:
    """Every namespace's labels (one list call)."""
    with translated("listing namespaces"):
        items, _ = list_objects(client.CoreV1Api(kube).list_namespace)
    return {
        str((ns.get("metadata") or {}).get("name", "")): dict((ns.get("metadata") or {}).get("labels") or {})
        for ns in items
    }
