"""Node and pod reads and small node patches the lifecycle needs (annotation, taint, finalizer, delete).

Reads parse the API JSON with `Node.from_live` / `Pod.from_live`: the lifecycle handles every node
and pod, those karpy cannot plan with included. List-valued fields (taints, finalizers) are changed
with a JSON patch that first tests the old value (finalizers) or the element it removes (a taint:
the model does not keep every field the server stores, such as timeAdded), so a concurrent writer
makes the patch fail (422, or 409) instead of being silently overwritten. That is optimistic
concurrency, not an error: the node is read again, the patch rebuilt from the fresh copy and sent
again, quietly (DEBUG), with extender.retry's API backoff.
Only a patch still failing after that reaches the caller.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from extender import retry
from extender.api.node import Node
from extender.api.pod import Pod
from extender.api.provisioner import Taint
from extender.cluster.client import call_json
from extender.cluster.errors import Conflict, Invalid, NotFound, is_transient, translated
from extender.cluster.watch import list_objects

log = logging.getLogger("karpy.lifecycle")

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"


def get_node(kube: Any, name: str) -> Node | None:
    try:
        with translated(f"reading node {name}"):
            manifest = call_json(client.CoreV1Api(kube).read_node, name)
    except NotFound:
        return None
    return Node.from_live(manifest)


def pods_on_node(kube: Any, node: str) -> list[Pod]:
    with translated(f"listing pods on node {node}"):
        manifests, _ = list_objects(
            client.CoreV1Api(kube).list_pod_for_all_namespaces, field_selector=f"spec.nodeName={node}"
        )
    return [Pod.from_live(m) for m in manifests]


def workload(pods: Iterable[Pod]) -> list[Pod]:
    """The pods that make a node non-empty: live, and neither DaemonSet nor static."""
    return [p for p in pods if not p.is_terminal and not p.node_bound]


def set_annotation(kube: Any, node: str, key: str, value: str | None) -> None:
    """Set (or with None, remove) one annotation; a node already gone is fine."""
    body = {"metadata": {"annotations": {key: value}}}
    _ignore_404(lambda: _patch(kube, node, body, MERGE_PATCH))


Patch = list[dict[str, Any]]


def patch_fresh(kube: Any, node: Node, build: Callable[[Node], Patch | None]) -> bool:
    """Send the JSON patch `build(node)`; when the node changed under it (409/422), read the node
    again and send `build(fresh)`. `build` returns None when nothing is left to do. True when a
    patch was applied; False when none was needed or the node is gone."""
    name = node.name
    current: list[Node | None] = [node]

    def attempt() -> bool:
        latest = current[0]
        patch = build(latest) if latest is not None else None
        if patch is None:
            return False
        try:
            with translated(f"patching node {name}"):
                _patch(kube, name, patch, JSON_PATCH)
        except (Conflict, Invalid) as err:
            log.debug("Node %s changed under a patch, reading it again, %s", name, err)
            current[0] = get_node(kube, name)
            raise
        return True

    def changed_or_transient(err: BaseException) -> bool:
        return isinstance(err, Conflict | Invalid) or is_transient(err)

    try:
        return retry.call(attempt, retry_on=changed_or_transient, doing=f"patching node {name}")
    except NotFound:
        return False


def _tested_replace(node: Node, path: str, old: list[Any], new: list[Any]) -> Patch:
    """Replace the list at `path` if it still is `old`. An absent list cannot be tested, so adding
    one tests the node's resourceVersion instead (an `add` would overwrite a list added meanwhile)."""
    if old:
        return [{"op": "test", "path": path, "value": old}, {"op": "replace", "path": path, "value": new}]
    version = node.resource_version
    guard = [{"op": "test", "path": "/metadata/resourceVersion", "value": version}] if version else []
    return [*guard, {"op": "add", "path": path, "value": new}]


def add_taint(kube: Any, name: str, taint: Taint) -> bool:
    """Add `taint` to the node unless one of its key and effect is there; True when a patch was
    sent, False when none was needed or the node is gone. Appending tests the resourceVersion: the
    model does not keep every field of the taints already there (timeAdded), so they are not
    rewritten, and a taint added meanwhile is seen on the fresh copy."""
    node = get_node(kube, name)
    if node is None:
        return False
    value = {"key": taint.key, "effect": taint.effect, **({"value": taint.value} if taint.value else {})}

    def build(fresh: Node) -> Patch | None:
        if any(t.key == taint.key and t.effect == taint.effect for t in fresh.taints):
            return None
        if not fresh.taints:
            return _tested_replace(fresh, "/spec/taints", [], [value])
        version = fresh.resource_version
        guard = [{"op": "test", "path": "/metadata/resourceVersion", "value": version}] if version else []
        return [*guard, {"op": "add", "path": "/spec/taints/-", "value": value}]

    return patch_fresh(kube, node, build)


def remove_taint(kube: Any, node: Node, key: str) -> None:
    def build(fresh: Node) -> Patch | None:
        at = [i for i, taint in enumerate(fresh.taints) if taint.key == key]
        # From the last, so the earlier indices still hold; each tests its element is still there.
        patch: Patch = []
        for i in reversed(at):
            path = f"/spec/taints/{i}"
            patch += [{"op": "test", "path": f"{path}/key", "value": key}, {"op": "remove", "path": path}]
        return patch or None

    patch_fresh(kube, node, build)


def drop_taint(kube: Any, name: str, key: str) -> bool:
    """Remove the node's taints of `key`; True when it had one (False also when it is gone)."""
    node = get_node(kube, name)
    if node is None or not node.has_taint(key):
        return False
    remove_taint(kube, node, key)
    return True


def ensure_finalizer(kube: Any, node: Node, finalizer: str) -> bool:
    """Add `finalizer` if missing (nodes that registered themselves); True when a patch was sent."""

    def build(fresh: Node) -> Patch | None:
        old = list(fresh.finalizers)
        if finalizer in old or fresh.deleting:
            return None
        return _tested_replace(fresh, "/metadata/finalizers", old, [*old, finalizer])

    return patch_fresh(kube, node, build)


def remove_finalizer(kube: Any, node: Node, finalizer: str) -> None:
    def build(fresh: Node) -> Patch | None:
        old = list(fresh.finalizers)
        if finalizer not in old:
            return None
        return _tested_replace(fresh, "/metadata/finalizers", old, [f for f in old if f != finalizer])

    patch_fresh(kube, node, build)


def delete_node(kube: Any, node: str) -> None:
    _ignore_404(lambda: call_json(client.CoreV1Api(kube).delete_node, node))


def _patch(kube: Any, node: str, body: Any, content_type: str) -> None:
    call_json(client.CoreV1Api(kube).patch_node, node, body, _content_type=content_type)


def _ignore_404(fn: Callable[[], Any]) -> None:
    try:
        fn()
    except ApiException as err:
        if err.status != 404:
            raise
