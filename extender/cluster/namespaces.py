"""Namespace reads: name -> labels, for the namespaceSelector of pod (anti-)affinity terms."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kubernetes import client

from extender.cluster.errors import translated
from extender.cluster.watch import list_objects


def list_labels(kube: client.ApiClient) -> dict[str, dict[str, str]]:
    """Every namespace's labels (one list call)."""
    with translated("listing namespaces"):
        items, _ = list_objects(client.CoreV1Api(kube).list_namespace)
    return labels_by_name(items)


def labels_by_name(namespaces: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    """Namespace API JSON -> name -> labels."""
    result = {}
    for ns in namespaces:
        meta = ns.get("metadata") or {}
        result[str(meta.get("name", ""))] = dict(meta.get("labels") or {})
    return result
