"""Cordon a node: `spec.unschedulable=true`, exactly what `kubectl cordon` sends (and uncordon)."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from extender.cluster.client import call_json
from extender.cluster.errors import NotFound, translated


def cordon(kube: Any, node: str) -> bool:
    """Mark `node` unschedulable; False when the node no longer exists (ClusterError otherwise)."""
    return _set_unschedulable(kube, node, True)


def uncordon(kube: Any, node: str) -> bool:
    """Let kube-scheduler use `node` again (an abandoned consolidation); False when it is gone."""
    return _set_unschedulable(kube, node, False)


def _set_unschedulable(kube: Any, node: str, value: bool) -> bool:
    try:
        with translated(f"{'cordoning' if value else 'uncordoning'} node {node}"):
            call_json(
                client.CoreV1Api(kube).patch_node,
                node,
                {"spec": {"unschedulable": value}},
                _content_type="application/merge-patch+json",
            )
    except NotFound:
        return False
    return True
