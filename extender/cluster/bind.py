"""Bind a pod to a node with the Binding subresource, as kube-scheduler's DefaultBinder does.

The python client declares the 201 answer a V1Binding, but the apiserver returns a Status, so
parsing it fails after the bind succeeded: the call is made with `_preload_content=False`.
"""

from __future__ import annotations

from kubernetes import client

from extender.cluster.errors import Conflict, translated


class AlreadyBound(Conflict):
    """409: the pod is bound already (or being deleted); nothing for karpy to do."""


def bind(kube: client.ApiClient, *, namespace: str, name: str, uid: str, node: str) -> None:
    """POST pods/<name>/binding; raises AlreadyBound on 409 and ClusterError on other failures."""
    body = {
        "apiVersion": "v1",
        "kind": "Binding",
        # The UID makes the bind a precondition on this very pod, not a same-named successor.
        "metadata": {"name": name, "namespace": namespace, **({"uid": uid} if uid else {})},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
    try:
        with translated(f"binding pod {namespace}/{name} to node {node}"):
            response = client.CoreV1Api(kube).create_namespaced_pod_binding(
                name, namespace, body, _preload_content=False
            )
    except Conflict as err:
        raise AlreadyBound(str(err), status=err.status, reason=err.reason) from err
    try:
        # Drain the small Status body: a connection handed back with unread bytes breaks the next
        # request that reuses it (ResponseNotReady).
        _ = response.data
    finally:
        response.release_conn()
