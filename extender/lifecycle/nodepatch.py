"""Node reads and small patches the lifecycle needs (annotation, taint, finalizer, delete).

List-valued fields (taints, finalizers) are changed with a JSON patch that first tests the old
value, so a concurrent writer makes the patch fail (422) instead of being silently overwritten.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from extender.cluster import objects
from extender.cluster.client import call_json
from extender.cluster.watch import list_objects

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"


def get_node(kube: Any, name: str) -> dict[str, Any] | None:
    try:
        return call_json(client.CoreV1Api(kube).read_node, name)
    except ApiException as err:
        if err.status == 404:
            return None
        raise


def pods_on_node(kube: Any, node: str) -> list[dict[str, Any]]:
    return list_objects(
        client.CoreV1Api(kube).list_pod_for_all_namespaces, field_selector=f"spec.nodeName={node}"
    )[0]


def set_annotation(kube: Any, node: str, key: str, value: str | None) -> None:
    """Set (or with None, remove) one annotation; a node already gone is fine."""
    body = {"metadata": {"annotations": {key: value}}}
    _ignore_404(lambda: _patch(kube, node, body, MERGE_PATCH))


def remove_taint(kube: Any, node: Mapping[str, Any], key: str) -> None:
    old = objects.taints(node)
    new = [t for t in old if t.get("key") != key]
    if len(new) == len(old):
        return
    patch = [
        {"op": "test", "path": "/spec/taints", "value": old},
        {"op": "replace", "path": "/spec/taints", "value": new},
    ]
    _patch(kube, objects.name(node), patch, JSON_PATCH)


def ensure_finalizer(kube: Any, node: Mapping[str, Any], finalizer: str) -> bool:
    """Add `finalizer` if missing (nodes that registered themselves); True when a patch was sent."""
    old = objects.finalizers(node)
    if finalizer in old or objects.deleting(node):
        return False
    _patch_finalizers(kube, node, old, [*old, finalizer])
    return True


def remove_finalizer(kube: Any, node: Mapping[str, Any], finalizer: str) -> None:
    old = objects.finalizers(node)
    if finalizer in old:
        _ignore_404(lambda: _patch_finalizers(kube, node, old, [f for f in old if f != finalizer]))


def delete_node(kube: Any, node: str) -> None:
    _ignore_404(lambda: call_json(client.CoreV1Api(kube).delete_node, node))


def _patch(kube: Any, node: str, body: Any, content_type: str) -> None:
    call_json(client.CoreV1Api(kube).patch_node, node, body, _content_type=content_type)


def _patch_finalizers(kube: Any, node: Mapping[str, Any], old: list[str], new: list[str]) -> None:
    if old:
        patch = [
            {"op": "test", "path": "/metadata/finalizers", "value": old},
            {"op": "replace", "path": "/metadata/finalizers", "value": new},
        ]
    else:
        patch = [{"op": "add", "path": "/metadata/finalizers", "value": new}]
    _patch(kube, objects.name(node), patch, JSON_PATCH)


def _ignore_404(fn: Callable[[], Any]) -> None:
    try:
        fn()
    except ApiException as err:
        if err.status != 404:
            raise
