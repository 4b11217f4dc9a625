"""A fake apiserver for the provisioning controller's unit tests: the cluster adapters the
controller calls, monkeypatched onto in-memory nodes, pods, namespaces, events and binds (API JSON,
as the adapters return it)."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Mapping
from functools import partial
from typing import Any

import pytest

from extender.api import labels as wk
from extender.api.node import Node
from extender.cluster import bind as kube_bind
from extender.cluster import events
from extender.cluster import namespaces as kube_namespaces
from extender.cluster import nodes as kube_nodes
from extender.cluster import pods as kube_pods
from extender.cluster import pool_resources as kube_provisioners
from extender.cluster import volumes as kube_volumes
from tests import builders
from tests.unit.scheduling.builders import make_provisioner

ZONE_A, ZONE_B = "us-west-2a", "us-west-2b"


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakeCluster:
    """Nodes, pods, namespaces and events as the cluster adapters return them (API JSON)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.nodes: dict[str, dict[str, Any]] = {}
        self.pods: dict[str, dict[str, Any]] = {}
        self.namespaces = {"ns": {"team": "a"}, "default": {}}
        self.events: list[dict[str, Any]] = []
        self.bound: dict[str, str] = {}
        #: Pod keys in the order their binds reached the apiserver.
        self.bind_order: list[str] = []
        #: pod key -> pod key: the bind of the first waits (a short while) for a bind of the
        #: second to start, so a bind order not enforced shows as the second bound first.
        self.bind_waits_for: dict[str, str] = {}
        self._bind_started: dict[str, threading.Event] = defaultdict(threading.Event)
        #: node -> pods that appear on it between planning and binding (kube-scheduler's doing).
        self.arrive: dict[str, list[dict[str, Any]]] = {}
        self.provisioners = [make_provisioner("default")]
        #: Claims, volumes and storage classes (empty: every claim is unknown).
        self.volumes = kube_volumes.Volumes()
        self.monkeypatch = m = monkeypatch
        m.setattr(
            kube_pods, "list_pending", lambda _: ([p for p in self.pods.values() if not _node_name(p)], "1")
        )
        m.setattr(kube_pods, "list_assigned", lambda _: [p for p in self.pods.values() if _node_name(p)])
        m.setattr(kube_pods, "list_on_node", self.list_on_node)
        m.setattr(kube_pods, "daemonset_pods", lambda _: [])
        m.setattr(kube_nodes, "list_nodes", self.list_nodes)
        m.setattr(kube_nodes, "list_node_manifests", lambda _, **_kw: list(self.nodes.values()))
        m.setattr(kube_nodes, "read_node", self.read_node)
        m.setattr(kube_nodes, "create_node", self.create_node)
        m.setattr(kube_volumes, "load", lambda _: self.volumes)
        m.setattr(kube_namespaces, "list_labels", lambda _: dict(self.namespaces))
        m.setattr(kube_provisioners, "list_configured", lambda *_: list(self.provisioners))
        m.setattr(kube_provisioners, "patch_status", lambda *_: None)
        m.setattr(events, "record", lambda _, **kw: self.events.append(kw))
        m.setattr(kube_bind, "bind", self.bind)
        #: pod key -> its status.nominatedNodeName as karpy last wrote it (None: cleared).
        self.nominated: dict[str, str | None] = {}
        m.setattr(kube_pods, "nominate", self.nominate)

    def list_nodes(self, _: Any, *, karpy_only: bool = False) -> list[Node]:
        nodes = [Node.from_manifest(n) for n in self.nodes.values()]
        return [n for n in nodes if n.is_karpy or not karpy_only]

    def read_node(self, _: Any, name: str) -> Node | None:
        node = self.nodes.get(name)
        return None if node is None else Node.from_manifest(node)

    def list_on_node(self, _: Any, node: str) -> list[dict[str, Any]]:
        for pod in self.arrive.pop(node, []):
            self.add_pod(pod)
        return [p for p in self.pods.values() if _node_name(p) == node]

    def create_node(self, _: Any, manifest: Mapping[str, Any]) -> bool:
        # The apiserver's TaintNodesByCondition taints every new Node until its kubelet is Ready.
        node = {**manifest, "spec": dict(manifest["spec"])}
        node["spec"]["taints"] = [
            *node["spec"].get("taints", []),
            {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
        ]
        self.nodes[manifest["metadata"]["name"]] = node
        return True

    def bind(self, _: Any, *, namespace: str, name: str, uid: str, node: str) -> None:
        self._bind_started[f"{namespace}/{name}"].set()
        if (other := self.bind_waits_for.get(f"{namespace}/{name}")) is not None:
            self._bind_started[other].wait(timeout=0.3)
        self.pods[f"{namespace}/{name}"]["spec"]["nodeName"] = node
        self.bound[f"{namespace}/{name}"] = node
        self.bind_order.append(f"{namespace}/{name}")

    def nominate(self, _: Any, namespace: str, name: str, node: str | None) -> None:
        key = f"{namespace}/{name}"
        self.nominated[key] = node
        if key in self.pods:
            self.pods[key].setdefault("status", {})["nominatedNodeName"] = node

    def add_node(self, name: str, zone: str, *, karpy: bool, cpu: str = "8") -> None:
        self.nodes[name] = builders.node_manifest(
            name,
            created=None,
            reason="",
            instance=None,
            provisioner="default" if karpy else None,
            labels={wk.ZONE: zone, wk.HOSTNAME: name, wk.INSTANCE_TYPE: "m5.2xlarge"},
            capacity={"cpu": cpu, "memory": "32Gi", "pods": "58"},
            allocatable={"cpu": cpu, "memory": "30Gi", "pods": "58"},
        )

    def add_pod(self, manifest: dict[str, Any]) -> str:
        key = f"{manifest['metadata'].get('namespace', 'default')}/{manifest['metadata']['name']}"
        self.pods[key] = manifest
        return key


def _node_name(pod: Mapping[str, Any]) -> str:
    return (pod.get("spec") or {}).get("nodeName") or ""


#: A pod waiting for a node, asking 1 CPU and 1Gi (phase Running and a node_name for one bound);
#: keywords as tests.builders.pod_manifest.
pending_pod = partial(
    builders.pod_manifest, namespace="ns", cpu="1", memory="1Gi", image=None, node_name="", phase="Pending"
)


def zone_anti_affinity(app: str) -> dict[str, Any]:
    return {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": wk.ZONE, "labelSelector": {"matchLabels": {"app": app}}}
            ]
        }
    }
