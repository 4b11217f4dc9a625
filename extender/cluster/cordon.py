"""Cordon a node: `spec.unschedulable=true`, exactly what `kubectl cordon` sends."""

from __future__ import annotations

from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from extender.cluster.client import call_json


def cordon(kube: Any, node: str) -> bool:
    """Mark `node` unschedulable; False when the node no longer exists."""
    try:
        call_json(
            client.CoreV1Api(kube).patch_node,
            node,
            {"spec": {"unschedulable": True}},
            _content_type="application/merge-patch+json",
        )
    except ApiException as err:
        if err.status == 404:
            return False
        raise
    return True
