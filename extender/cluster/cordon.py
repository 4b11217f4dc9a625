"""Cordon a node: `spec.unschedulable=true`, exactly what `kubectl cordon` sends."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from extender.cluster.client import call_json
from extender.cluster.errors import NotFound, translated


def cordon(kube: Any, node: str) -> bool:
    """Mark `node` unschedulable; False when the node no longer exists (ClusterError otherwise)."""
    try:
        with translated(f"cordoning node {node}"):
            call_json(
                client.CoreV1Api(kube).patch_node,
                node,
                {"spec": {"unschedulable": True}},
                _content_type="application/merge-patch+json",
            )
    except NotFound:
        return False
    return True
