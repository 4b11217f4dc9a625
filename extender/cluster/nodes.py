"""Node verbs for provisioning: create the Node of a launched instance, read one, list karpy's or all.

`list_nodes`, `read_node` and `list_karpy_nodes` parse the API JSON into the api's Node model right
here, where it enters (the lifecycle's with `Node.from_live`: it handles a node it cannot plan on).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubernetes import client

from extender import retry
from extender.api import labels as wk
from extender.api.node import Node
from extender.api.provisioner import Taint
from extender.api.resources import Resources, resource_list
from extender.cluster.client import call_json
from extender.cluster.errors import AlreadyExists, NotFound, is_transient, translated
from extender.cluster.watch import list_objects


def node_manifest(
    *,
    name: str,
    provider_id: str,
    labels: Mapping[str, str],
    taints: Sequence[Taint],
    capacity: Resources,
    allocatable: Resources,
    arch: str,
    os: str,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": name,
        "labels": {**labels, wk.HOSTNAME: name},
        "finalizers": [wk.TERMINATION_FINALIZER],
    }
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": metadata,
        "spec": {
            "providerID": provider_id,
            "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in taints],
        },
        "status": {
            "capacity": resource_list(capacity),
            "allocatable": resource_list(allocatable),
            "nodeInfo": {"architecture": arch, "operatingSystem": os},
        },
    }


def create_node(kube: client.ApiClient, manifest: Mapping[str, Any]) -> bool:
    """Create the Node; False if it exists already (kubelet registered first, a retried launch, or
    this call's own earlier attempt whose answer was lost). Throttling and server errors are
    retried: the instance is running, and a Node given up on leaves it to garbage collection while
    its pods wait for a second launch."""
    name = str((manifest.get("metadata") or {}).get("name", ""))

    def attempt() -> None:
        with translated(f"creating node {name}"):
            call_json(client.CoreV1Api(kube).create_node, manifest)

    try:
        retry.call(attempt, retry_on=is_transient, doing=f"creating node {name}")
    except AlreadyExists:
        return False
    return True


def instance_id(provider: str) -> str | None:
    """`aws:///us-west-2a/i-0abc` -> `i-0abc`; None for anything that is not an AWS instance id."""
    if not provider.startswith("aws://"):
        return None
    last = provider.rstrip("/").rsplit("/", 1)[-1]
    return last if last.startswith("i-") else None


def list_karpy_nodes(kube: client.ApiClient) -> list[Node]:
    """Every Node a Provisioner or NodePool launched (they carry one of `wk.OWNER_LABELS`)."""
    return [Node.from_live(item) for item in list_node_manifests(kube, karpy_only=True)]


def list_node_manifests(kube: client.ApiClient, *, karpy_only: bool = False) -> list[dict[str, Any]]:
    """Every Node (or only karpy's) as API JSON, for the indexes that parse it as it changes."""
    list_node = client.CoreV1Api(kube).list_node
    if not karpy_only:
        with translated("listing nodes"):
            return list_objects(list_node)[0]
    # A Provisioner's nodes carry one owner label, a NodePool's the other; a selector cannot OR keys.
    with translated("listing karpy nodes"):
        return [item for key in wk.OWNER_LABELS for item in list_objects(list_node, label_selector=key)[0]]


def list_nodes(kube: client.ApiClient, *, karpy_only: bool = False) -> list[Node]:
    """Every Node of the cluster (the solver counts their pods and topology domains), or only the
    ones a Provisioner launched."""
    return [Node.from_manifest(item) for item in list_node_manifests(kube, karpy_only=karpy_only)]


def read_node(kube: client.ApiClient, name: str) -> Node | None:
    """The Node as it is now; None if it is gone."""
    try:
        with translated(f"reading node {name}"):
            node = call_json(client.CoreV1Api(kube).read_node, name)
    except NotFound:
        return None
    return Node.from_manifest(node)


def delete_node(kube: client.ApiClient, name: str) -> None:
    """Delete the Node: its termination finalizer hands it to the lifecycle, which drains it and
    terminates its instance. A node already gone is what was asked."""
    try:
        with translated(f"deleting node {name}"):
            call_json(client.CoreV1Api(kube).delete_node, name)
    except NotFound:
        pass
