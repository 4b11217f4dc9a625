"""Cordon a node: `spec.unschedulable=true`, exactly what `kubectl cordon` sends (and uncordon)."""

from __future__ import annotations

from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from extender.cluster.client import call_json


def cordon(kube: Any, node: str) -> bool:
    """Mark `node` unschedulable; False when the node no longer exists."""
    return _set_unschedulable(kube, node, True)


def uncordon(kube: Any, node: str) -> bool:
    """Let kube-scheduler use `node` again (an abandoned consolidation); False when it is gone."""
    return _set_unschedulable(kube, node, False)


def _set_unschedulable(kube: Any, node: str, value: bool) -> bool:
    try:
        call_json(
            client.CoreV1Api(kube).patch_node,
            node,
            {"spec": {"unschedulable": value}},
            _content_type="application/merge-patch+json",
        )
    except ApiException as err:
        if err.status == 404:
            return False
        raise
    return True
