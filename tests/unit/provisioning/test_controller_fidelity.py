"""The provisioning worker's side of scheduling fidelity, on a fake apiserver and cloud:
every node and namespace goes to the solver, unmodelled and unreadable pods are reported and
never bound, and a pod the live node no longer admits is not bound."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import pytest

from extender.api import labels as wk
from extender.cloud.types import Instance, LaunchRequest, LaunchResult
from extender.cluster import bind as kube_bind
from extender.cluster import events
from extender.cluster import namespaces as kube_namespaces
from extender.cluster import nodes as kube_nodes
from extender.cluster import pods as kube_pods
from extender.cluster import provisioners as kube_provisioners
from extender.provisioning import plan as plan_module
from extender.provisioning.controller import ProvisioningController
from extender.settings import Settings
from extender.state import ClusterState
from tests.unit.scheduling.builders import catalog, make_provisioner

ZONE_A, ZONE_B = "us-west-2a", "us-west-2b"


class FakeCloud:
    def __init__(self) -> None:
        self.requests: list[LaunchRequest] = []
        self.ids = itertools.count(1)

    def get_instance_types(self, _: Any = None) -> list[Any]:
        return list(catalog())

    def create(self, request: LaunchRequest) -> LaunchResult:
        self.requests.append(request)
        zone = sorted(request.zones)[0]
        instances = []
        for _ in range(request.count):
            n = next(self.ids)
            instances.append(
                Instance(
                    id=f"i-{n:04d}",
                    instance_type=request.instance_types[0],
                    zone=zone,
                    capacity_type=request.capacity_types[0],
                    private_dns_name=f"ip-10-0-0-{n}.ec2.internal",
                    provider_id=f"aws:///{zone}/i-{n:04d}",
                    state="running",
                )
            )
        return LaunchResult(instances=instances)


class FakeCluster:
    """Nodes, pods, namespaces and events as the cluster adapters return them (API JSON)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.nodes: dict[str, dict[str, Any]] = {}
        self.pods: dict[str, dict[str, Any]] = {}
        self.namespaces = {"ns": {"team": "a"}, "default": {}}
        self.events: list[dict[str, Any]] = []
        self.bound: dict[str, str] = {}
        #: node -> pods that appear on it between planning and binding (kube-scheduler's doing).
        self.arrive: dict[str, list[dict[str, Any]]] = {}
        self.provisioners = [make_provisioner("default")]
        m = monkeypatch
        m.setattr(kube_pods, "list_pending", lambda _: ([p for p in self.pods.values() if not _node(p)], "1"))
        m.setattr(kube_pods, "list_assigned", lambda _: [p for p in self.pods.values() if _node(p)])
        m.setattr(kube_pods, "list_on_node", self.list_on_node)
        m.setattr(kube_pods, "daemonset_pods", lambda _: [])
        m.setattr(kube_nodes, "list_nodes", lambda _: list(self.nodes.values()))
        m.setattr(
            kube_nodes,
            "list_karpy_nodes",
            lambda _: [n for n in self.nodes.values() if wk.PROVISIONER_NAME in n["metadata"]["labels"]],
        )
        m.setattr(kube_nodes, "read_node", lambda _, name: self.nodes.get(name))
        m.setattr(kube_nodes, "create_node", self.create_node)
        m.setattr(kube_namespaces, "list_labels", lambda _: dict(self.namespaces))
        m.setattr(kube_provisioners, "list_configured", lambda *_: list(self.provisioners))
        m.setattr(kube_provisioners, "patch_status", lambda *_: None)
        m.setattr(events, "record", lambda _, **kw: self.events.append(kw))
        m.setattr(kube_bind, "bind", self.bind)

    def list_on_node(self, _: Any, node: str) -> list[dict[str, Any]]:
        for pod in self.arrive.pop(node, []):
            self.add_pod(pod)
        return [p for p in self.pods.values() if _node(p) == node]

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
        self.pods[f"{namespace}/{name}"]["spec"]["nodeName"] = node
        self.bound[f"{namespace}/{name}"] = node

    def add_node(self, name: str, zone: str, *, karpy: bool, cpu: str = "8") -> None:
        labels = {wk.ZONE: zone, wk.HOSTNAME: name, wk.INSTANCE_TYPE: "m5.2xlarge"}
        if karpy:
            labels[wk.PROVISIONER_NAME] = "default"
        self.nodes[name] = {
            "metadata": {"name": name, "labels": labels},
            "spec": {},
            "status": {
                "capacity": {"cpu": cpu, "memory": "32Gi", "pods": "58"},
                "allocatable": {"cpu": cpu, "memory": "30Gi", "pods": "58"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }

    def add_pod(self, manifest: dict[str, Any]) -> str:
        key = f"{manifest['metadata'].get('namespace', 'default')}/{manifest['metadata']['name']}"
        self.pods[key] = manifest
        return key


def _node(pod: Mapping[str, Any]) -> str:
    return (pod.get("spec") or {}).get("nodeName") or ""


def pod(name: str, *, labels: dict[str, str] | None = None, node: str = "", **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "labels": labels or {}},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
            **spec,
        },
        "status": {"phase": "Running" if node else "Pending"},
    }


def zone_anti_affinity(app: str) -> dict[str, Any]:
    return {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": wk.ZONE, "labelSelector": {"matchLabels": {"app": app}}}
            ]
        }
    }


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> tuple[FakeCluster, FakeCloud, ProvisioningController]:
    cluster, cloud = FakeCluster(monkeypatch), FakeCloud()
    controller = ProvisioningController(
        settings=Settings(),
        kube=None,
        cloud=cloud,
        state=ClusterState(),  # type: ignore[arg-type]
    )
    return cluster, cloud, controller


def run_batch(cluster: FakeCluster, controller: ProvisioningController, keys: list[str]) -> None:
    controller.provision({k: cluster.pods[k] for k in keys})
    controller.pools.drain()


def reasons(cluster: FakeCluster, name: str) -> list[str]:
    return [e["reason"] for e in cluster.events if e["kind"] == "Pod" and e["name"] == name]


def test_every_node_and_the_namespaces_reach_the_solver(world, monkeypatch) -> None:
    cluster, cloud, controller = world
    seen: dict[str, Any] = {}
    real = plan_module.solve

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.update(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(plan_module, "solve", spy)
    cluster.add_node("theirs", ZONE_A, karpy=False)
    cluster.add_node("ours", ZONE_A, karpy=True, cpu="1")
    cluster.add_pod(pod("db", labels={"app": "db"}, node="theirs"))
    cluster.add_pod(pod("done", labels={"app": "db"}, node="ours") | {"status": {"phase": "Succeeded"}})
    key = cluster.add_pod(pod("web", labels={"app": "web"}, affinity=zone_anti_affinity("db")))
    run_batch(cluster, controller, [key])
    existing = {n.name: n for n in seen["existing_nodes"]}
    assert not existing["theirs"].schedulable and [p.key for p in existing["theirs"].pods] == ["ns/db"]
    assert existing["ours"].schedulable and existing["ours"].pods == ()
    assert seen["namespaces"] == cluster.namespaces
    # Anti-affinity against the pod on the other node: new capacity outside zone a.
    (request,) = cloud.requests
    assert ZONE_A not in request.zones
    assert cluster.bound[key] != "theirs"
    new_node = cluster.nodes[cluster.bound[key]]
    assert new_node["metadata"]["labels"]["failure-domain.beta.kubernetes.io/zone"] != ZONE_A
    assert new_node["metadata"]["labels"]["failure-domain.beta.kubernetes.io/region"] == "us-west-2"


def test_unmodelled_pod_gets_an_event_and_is_neither_bound_nor_parked(world) -> None:
    cluster, _cloud, controller = world
    volume = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    odd = cluster.add_pod(pod("odd", volumes=volume))
    fine = cluster.add_pod(pod("fine"))
    run_batch(cluster, controller, [odd, fine])
    assert fine in cluster.bound and odd not in cluster.bound
    assert reasons(cluster, "odd") == ["UnmodelledRule"]
    event = next(e for e in cluster.events if e["name"] == "odd")
    assert event["warning"] and "spec.volumes[0]" in event["message"]
    assert odd not in controller._parked and odd not in controller.batcher._window.items
    # Seen again in a later batch: no second Event.
    run_batch(cluster, controller, [odd])
    assert reasons(cluster, "odd") == ["UnmodelledRule"]


def test_a_pod_karpy_cannot_parse_gets_an_event_and_the_batch_goes_on(world) -> None:
    cluster, _cloud, controller = world
    bad = pod("bad")
    bad["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1x"
    bad_key = cluster.add_pod(bad)
    fine = cluster.add_pod(pod("fine"))
    run_batch(cluster, controller, [bad_key, fine])
    assert list(cluster.bound) == [fine]
    assert reasons(cluster, "bad") == ["InvalidPod"]
    message = next(e["message"] for e in cluster.events if e["name"] == "bad")
    assert "spec.containers[0].resources.requests.cpu" in message


def test_a_pod_the_live_node_no_longer_admits_is_not_bound_and_comes_back(world) -> None:
    cluster, cloud, controller = world
    cluster.add_node("ours", ZONE_A, karpy=True)
    port = [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 8080}]}]
    web = pod("web")
    web["spec"]["containers"][0]["ports"] = port[0]["ports"]
    key = cluster.add_pod(web)
    # kube-scheduler binds a pod holding the same host port to the node after karpy planned.
    squatter = pod("squatter", node="ours")
    squatter["spec"]["containers"][0]["ports"] = port[0]["ports"]
    cluster.arrive["ours"] = [squatter]
    run_batch(cluster, controller, [key])
    assert key not in cluster.bound and cloud.requests == []
    assert reasons(cluster, "web") == ["NotBinding"]
    message = next(e["message"] for e in cluster.events if e["name"] == "web")
    assert message.startswith("not binding to node ours, ") and "8080" in message
    # Back through the window once; refused again soon after, it waits for the parked retry.
    assert key in controller.batcher._window.items
    cluster.pods.pop("ns/squatter")
    cluster.arrive["ours"] = [squatter]
    run_batch(cluster, controller, [key])
    assert key in controller._parked


def test_a_node_cordoned_since_planning_takes_no_pods(world, monkeypatch) -> None:
    cluster, _cloud, controller = world
    cluster.add_node("ours", ZONE_A, karpy=True)
    key = cluster.add_pod(pod("web"))
    real_read = kube_nodes.read_node

    def cordoned(kube: Any, name: str) -> Any:
        node = real_read(kube, name)
        return node and {**node, "spec": {"unschedulable": True}}

    monkeypatch.setattr(kube_nodes, "read_node", cordoned)
    run_batch(cluster, controller, [key])
    assert key not in cluster.bound
    assert "cordoned" in next(e["message"] for e in cluster.events if e["name"] == "web")
