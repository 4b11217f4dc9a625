"""The provisioning worker's side of scheduling fidelity, on a fake apiserver and cloud:
every node and namespace goes to the solver, unmodelled and unreadable pods are reported and
never bound, and a pod the live node no longer admits is not bound."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from extender.cloud.fake import FakeCloudProvider
from extender.cluster import nodes as kube_nodes
from extender.cluster.boundpods import BoundPods
from extender.provisioning import batch_plan as plan_module
from extender.provisioning.controller import ProvisioningController
from extender.settings import Settings
from extender.state import ClusterState
from tests.unit.provisioning.fakes import ZONE_A, ZONE_B, FakeCluster, pending_pod, zone_anti_affinity
from tests.unit.scheduling.builders import catalog


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> tuple[FakeCluster, FakeCloudProvider, ProvisioningController]:
    cluster, cloud = FakeCluster(monkeypatch), FakeCloudProvider(catalog=catalog())
    controller = ProvisioningController(
        settings=Settings(),
        kube=None,
        cloud=cloud,
        state=ClusterState(),  # type: ignore[arg-type]
        bound=BoundPods(),
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
    cluster.add_pod(pending_pod("db", labels={"app": "db"}, node_name="theirs", phase="Running"))
    cluster.add_pod(
        pending_pod("done", labels={"app": "db"}, node_name="ours", phase="Running")
        | {"status": {"phase": "Succeeded"}}
    )
    key = cluster.add_pod(pending_pod("web", labels={"app": "web"}, affinity=zone_anti_affinity("db")))
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
    odd = cluster.add_pod(pending_pod("odd", volumes=volume))
    fine = cluster.add_pod(pending_pod("fine"))
    run_batch(cluster, controller, [odd, fine])
    assert fine in cluster.bound and odd not in cluster.bound
    assert reasons(cluster, "odd") == ["UnmodelledRule"]
    event = next(e for e in cluster.events if e["name"] == "odd")
    assert event["warning"] and "spec.volumes[0]" in event["message"]
    assert odd not in controller.parked and odd not in controller.batcher._window.items
    # Seen again in a later batch: no second Event.
    run_batch(cluster, controller, [odd])
    assert reasons(cluster, "odd") == ["UnmodelledRule"]


def test_claims_reach_the_solver_and_a_claim_awaiting_provisioning_is_left_to_kube_scheduler(world) -> None:
    """VolumeBinding: the bound claim's volume pins its pod to zone b; the claim of a
    WaitForFirstConsumer class is provisioned in kube-scheduler's PreBind, so that pod gets a node,
    its room is held there and kube-scheduler binds it."""
    cluster, _cloud, controller = world
    zone_b = {
        "matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": [ZONE_B]}]
    }
    cluster.volumes.volumes["pv-b"] = {
        "metadata": {"name": "pv-b"},
        "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [zone_b]}}},
    }
    cluster.volumes.claims["ns/zonal"] = {
        "metadata": {
            "name": "zonal",
            "namespace": "ns",
            "annotations": {"pv.kubernetes.io/bind-completed": "yes"},
        },
        "spec": {"volumeName": "pv-b", "storageClassName": ""},
    }
    cluster.volumes.claims["ns/later"] = {
        "metadata": {"name": "later", "namespace": "ns"},
        "spec": {"storageClassName": "wffc"},
    }
    cluster.volumes.classes["wffc"] = {
        "metadata": {"name": "wffc"},
        "volumeBindingMode": "WaitForFirstConsumer",
    }
    zonal = cluster.add_pod(
        pending_pod("zonal", volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "zonal"}}])
    )
    later = cluster.add_pod(
        pending_pod("later", volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "later"}}])
    )
    run_batch(cluster, controller, [zonal, later])
    assert later not in cluster.bound and reasons(cluster, "later") == ["Nominated"]
    hold = controller.state.held(later)
    assert hold is not None and hold.node in cluster.nodes
    node = cluster.nodes[cluster.bound[zonal]]
    assert node["metadata"]["labels"]["topology.kubernetes.io/zone"] == ZONE_B


def test_a_pod_karpy_cannot_parse_gets_an_event_and_the_batch_goes_on(world) -> None:
    cluster, _cloud, controller = world
    bad = pending_pod("bad")
    bad["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1x"
    bad_key = cluster.add_pod(bad)
    fine = cluster.add_pod(pending_pod("fine"))
    run_batch(cluster, controller, [bad_key, fine])
    assert list(cluster.bound) == [fine]
    assert reasons(cluster, "bad") == ["InvalidPod"]
    message = next(e["message"] for e in cluster.events if e["name"] == "bad")
    assert "spec.containers[0].resources.requests.cpu" in message


def test_a_pod_the_live_node_no_longer_admits_is_not_bound_and_comes_back(world) -> None:
    cluster, cloud, controller = world
    cluster.add_node("ours", ZONE_A, karpy=True)
    port = [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 8080}]}]
    web = pending_pod("web")
    web["spec"]["containers"][0]["ports"] = port[0]["ports"]
    key = cluster.add_pod(web)
    # kube-scheduler binds a pod holding the same host port to the node after karpy planned.
    squatter = pending_pod("squatter", node_name="ours", phase="Running")
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
    assert key in controller.parked


def test_a_node_cordoned_since_planning_takes_no_pods(world, monkeypatch) -> None:
    cluster, _cloud, controller = world
    cluster.add_node("ours", ZONE_A, karpy=True)
    key = cluster.add_pod(pending_pod("web"))
    real_read = kube_nodes.read_node

    def cordoned(kube: Any, name: str) -> Any:
        node = real_read(kube, name)
        return node and dataclasses.replace(node, unschedulable=True)

    monkeypatch.setattr(kube_nodes, "read_node", cordoned)
    run_batch(cluster, controller, [key])
    assert key not in cluster.bound
    assert "cordoned" in next(e["message"] for e in cluster.events if e["name"] == "web")
