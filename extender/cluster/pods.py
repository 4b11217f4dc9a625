"""Pod reads: pending pods (spec.nodeName empty), bound pods (all, or one node's), DaemonSet templates;
and the one pod write besides binding, `status.nominatedNodeName`."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from extender.cluster.client import call_json
from extender.cluster.errors import translated
from extender.cluster.watch import list_objects

PENDING = "spec.nodeName=,status.phase!=Succeeded,status.phase!=Failed"
ASSIGNED = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"


def list_pending(kube: client.ApiClient) -> tuple[list[dict[str, Any]], str]:
    """Unbound, non-terminal pods in every namespace, and the resourceVersion to watch from."""
    with translated("listing pending pods"):
        return list_objects(client.CoreV1Api(kube).list_pod_for_all_namespaces, field_selector=PENDING)


def list_assigned(kube: client.ApiClient) -> list[dict[str, Any]]:
    """Bound, non-terminal pods in every namespace."""
    with translated("listing bound pods"):
        return list_objects(client.CoreV1Api(kube).list_pod_for_all_namespaces, field_selector=ASSIGNED)[0]


def list_on_node(kube: client.ApiClient, node: str) -> list[dict[str, Any]]:
    """Non-terminal pods bound to `node` now (the re-check right before binding reads these)."""
    with translated(f"listing pods on node {node}"):
        return list_objects(
            client.CoreV1Api(kube).list_pod_for_all_namespaces,
            field_selector=f"spec.nodeName={node},status.phase!=Succeeded,status.phase!=Failed",
        )[0]


def daemonset_pods(kube: client.ApiClient) -> list[dict[str, Any]]:
    """One pod manifest per DaemonSet (its template), owned by it, for the solver's overhead."""
    with translated("listing daemonsets"):
        daemonsets, _ = list_objects(client.AppsV1Api(kube).list_daemon_set_for_all_namespaces)
    result = []
    for ds in daemonsets:
        meta = ds.get("metadata") or {}
        template = (ds.get("spec") or {}).get("template") or {}
        result.append(
            {
                "metadata": {
                    "name": meta.get("name", ""),
                    "namespace": meta.get("namespace", ""),
                    "labels": (template.get("metadata") or {}).get("labels") or {},
                    "ownerReferences": [
                        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": meta.get("name", "")}
                    ],
                },
                "spec": template.get("spec") or {},
            }
        )
    return result


def nominate(kube: client.ApiClient, namespace: str, name: str, node: str | None) -> None:
    """Set (None: clear) the pod's `status.nominatedNodeName` (pods/status patch). kube-scheduler's
    nominator counts a nominated pod's requests on that node when it filters pods of lower or equal
    priority there, and tries that node first for the pod itself (KEP-5278 lets components other
    than the scheduler nominate)."""
    body = {"status": {"nominatedNodeName": node}}
    with translated(f"nominating pod {namespace}/{name}"):
        call_json(
            client.CoreV1Api(kube).patch_namespaced_pod_status,
            name,
            namespace,
            body,
            _content_type="application/merge-patch+json",
        )
