"""Issue 5's proofs on the local control plane + moto: the provisioning worker and the extender
run in this process against the real kube-apiserver/kube-scheduler/kwok and moto.

The extender app is served on the port kube-scheduler calls (cluster.extender_url). Every test
uses its own Provisioner name and namespace, so nodes left by one test never take another's pods.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from werkzeug.serving import make_server

from extender.api import labels as wk
from extender.cloud.aws.provider import AWSCloudProvider
from extender.cloud.metrics import decorate
from extender.http.app import create_app
from extender.provisioning.controller import ProvisioningController
from extender.settings import AWSSettings, BatchingSettings, LeaderElectionSettings, Settings
from extender.state import ClusterState
from tests.integration.test_webhook import _apply_crd

pytestmark = pytest.mark.integration

SHARED_PRICES = Path(__file__).resolve().parents[3] / "shared" / "data" / "ec2-on-demand-prices.json"


@dataclass
class Karpy:
    controller: ProvisioningController
    state: ClusterState
    cloud: AWSCloudProvider
    kube: Any

    @property
    def ec2(self) -> Any:
        return self.cloud.clients.ec2


@pytest.fixture(scope="module")
def karpy(cluster: Any) -> Iterator[Karpy]:
    kube = cluster.api_client()
    _apply_crd(kube)
    seed = cluster.aws
    settings = Settings(
        cluster_name=cluster.state.get("cluster_name", seed.cluster_name),
        cluster_endpoint=cluster.apiserver_url,
        kubeconfig=cluster.kubeconfig,
        aws=AWSSettings(
            region=seed.region,
            endpoint_url=seed.endpoint_url,
            ssm_prefix=seed.ssm_prefix,
            pricing_api=False,
            price_file=str(SHARED_PRICES),
            kubernetes_version=seed.k8s_version,
            default_instance_profile="karpy-node",
        ),
        batching=BatchingSettings(idle_seconds=1.0, max_seconds=10.0),
        leader_election=LeaderElectionSettings(enabled=False),
    )
    raw_cloud = AWSCloudProvider(settings=settings)
    state = ClusterState()
    controller = ProvisioningController(settings=settings, kube=kube, cloud=decorate(raw_cloud), state=state)
    stop = threading.Event()
    controller.start(stop)
    server = make_server(
        "127.0.0.1", cluster.extender_port, create_app(settings, state, controller.enqueue), threaded=True
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield Karpy(controller, state, raw_cloud, kube)
    finally:
        stop.set()
        server.shutdown()


# -- helpers ---------------------------------------------------------------------------------------


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def provisioner(kube: Any, name: str, requirements: list[dict[str, Any]], **spec: Any) -> None:
    from kubernetes import client

    body = {
        "apiVersion": wk.API_VERSION,
        "kind": "Provisioner",
        "metadata": {"name": name},
        "spec": {"requirements": requirements, **spec},
    }
    client.CustomObjectsApi(kube).create_cluster_custom_object(
        "karpenter.sh", "v1alpha5", "provisioners", body
    )


def pod_manifest(name: str, cpu: str, memory: str = "64Mi", selector: dict[str, str] | None = None) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "inflate"}},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "nodeSelector": selector or {},
            "containers": [
                {
                    "name": "pause",
                    "image": "registry.k8s.io/pause:3.9",
                    "resources": {"requests": {"cpu": cpu, "memory": memory}},
                }
            ],
        },
    }


def create_pods(core: Any, namespace: str, manifests: list[dict]) -> None:
    for manifest in manifests:
        core.create_namespaced_pod(namespace, manifest)


def wait_for(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.25)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def pods_of(core: Any, namespace: str) -> list[Any]:
    return core.list_namespaced_pod(namespace).items


def all_bound(core: Any, namespace: str, count: int, running: bool = False) -> Callable[[], list[Any]]:
    def check() -> list[Any]:
        items = pods_of(core, namespace)
        ok = len(items) == count and all(p.spec.node_name for p in items)
        if running:
            ok = ok and all(p.status.phase == "Running" for p in items)
        return items if ok else []

    return check


def node_of(core: Any, name: str) -> Any:
    return core.read_node(name)


def instance_tags(karpy: Karpy, node: Any) -> dict[str, str]:
    instance_id = node.spec.provider_id.rsplit("/", 1)[-1]
    reservations = karpy.ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
    return {t["Key"]: t["Value"] for t in reservations[0]["Instances"][0].get("Tags", [])}


# -- proofs ----------------------------------------------------------------------------------------


def test_walkthrough_inflate_five_pods_on_one_8_vcpu_node(
    karpy: Karpy, core_v1: Any, apps_v1: Any, namespace: str
) -> None:
    name = unique("default")
    provisioner(
        karpy.kube,
        name,
        [{"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["spot"]}],
        ttlSecondsAfterEmpty=30,
    )
    template = pod_manifest("inflate", "1", selector={wk.PROVISIONER_NAME: name})
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "inflate"},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "inflate"}},
            "template": {"metadata": template["metadata"], "spec": template["spec"]},
        },
    }
    apps_v1.create_namespaced_deployment(namespace, deployment)
    apps_v1.patch_namespaced_deployment_scale("inflate", namespace, {"spec": {"replicas": 5}})
    pods = wait_for(all_bound(core_v1, namespace, 5, running=True), 90, "5 inflate pods Running")
    nodes = {p.spec.node_name for p in pods}
    assert len(nodes) == 1
    node = node_of(core_v1, nodes.pop())
    itype = node.metadata.labels[wk.INSTANCE_TYPE]
    catalog = {t.name: t for t in karpy.cloud.get_instance_types()}
    assert catalog[itype].cpu == 8
    assert node.metadata.labels[wk.CAPACITY_TYPE] == "spot"
    assert node.metadata.labels[wk.PROVISIONER_NAME] == name
    assert node.spec.provider_id.startswith("aws:///")
    assert wk.TERMINATION_FINALIZER in node.metadata.finalizers
    tags = instance_tags(karpy, node)
    cluster = karpy.controller.settings.cluster_name
    assert tags[f"kubernetes.io/cluster/{cluster}"] == "owned"
    assert tags[f"karpenter.sh/cluster/{cluster}"] == "owned"
    assert tags[wk.PROVISIONER_NAME] == name and tags["Name"]


def test_instance_type_selector_gives_two_c5_xlarge_nodes_3_plus_2(
    karpy: Karpy, core_v1: Any, namespace: str
) -> None:
    name = unique("c5")
    provisioner(karpy.kube, name, [])
    selector = {wk.PROVISIONER_NAME: name, wk.INSTANCE_TYPE: "c5.xlarge"}
    create_pods(core_v1, namespace, [pod_manifest(f"p{i}", "1", selector=selector) for i in range(5)])
    pods = wait_for(all_bound(core_v1, namespace, 5), 90, "5 pods bound")
    per_node: dict[str, int] = {}
    for p in pods:
        per_node[p.spec.node_name] = per_node.get(p.spec.node_name, 0) + 1
    assert sorted(per_node.values()) == [2, 3]
    assert {node_of(core_v1, n).metadata.labels[wk.INSTANCE_TYPE] for n in per_node} == {"c5.xlarge"}


def test_extender_guard_and_fast_path(karpy: Karpy, core_v1: Any, namespace: str) -> None:
    name = unique("guard")
    provisioner(karpy.kube, name, [])
    selector = {wk.PROVISIONER_NAME: name}
    create_pods(core_v1, namespace, [pod_manifest("seed", "500m", selector=selector)])
    seed = wait_for(all_bound(core_v1, namespace, 1), 90, "seed pod bound")[0]
    node = seed.spec.node_name
    # kwok makes the node Ready and removes nothing; drop karpy's not-ready taint as lifecycle would.
    wait_for(
        lambda: any(
            c.type == "Ready" and c.status == "True" for c in node_of(core_v1, node).status.conditions or []
        ),
        60,
        "node Ready",
    )
    core_v1.patch_node(node, {"spec": {"taints": None}})
    karpy.state.mark_for_removal(node, "draining")
    launched_before = len(karpy.controller.reports)
    create_pods(core_v1, namespace, [pod_manifest("late", "100m", selector=selector)])
    late = wait_for(
        lambda: (p := core_v1.read_namespaced_pod("late", namespace)).spec.node_name and p,
        60,
        "late pod bound",
    )
    assert late.spec.node_name != node, "kube-scheduler chose a node marked for removal"
    assert len(karpy.controller.reports) > launched_before
    karpy.state.unmark(node)


def test_capacity_error_on_cheapest_offering_replans_in_same_batch(
    karpy: Karpy, core_v1: Any, namespace: str
) -> None:
    name = unique("ice")
    provisioner(karpy.kube, name, [{"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}])
    refused: list[str] = []

    def refuse_first(parsed: dict, **_: Any) -> None:
        if refused or not parsed.get("Instances"):
            return
        first = parsed["Instances"].pop(0)
        refused.append(first["InstanceType"])
        karpy.ec2.terminate_instances(InstanceIds=first["InstanceIds"])
        parsed.setdefault("Errors", []).append(
            {
                "ErrorCode": "InsufficientInstanceCapacity",
                "ErrorMessage": "injected",
                "LaunchTemplateAndOverrides": first["LaunchTemplateAndOverrides"],
                "Lifecycle": "on-demand",
            }
        )

    karpy.ec2.meta.events.register("after-call.ec2.CreateFleet", refuse_first)
    try:
        batches_before = len(karpy.controller.reports)
        selector = {wk.PROVISIONER_NAME: name}
        create_pods(core_v1, namespace, [pod_manifest(f"p{i}", "1", selector=selector) for i in range(2)])
        pods = wait_for(all_bound(core_v1, namespace, 2), 90, "pods bound after capacity error")
    finally:
        karpy.ec2.meta.events.unregister("after-call.ec2.CreateFleet", refuse_first)
    assert refused
    node = node_of(core_v1, pods[0].spec.node_name)
    assert node.metadata.labels[wk.INSTANCE_TYPE] != refused[0]
    batch = karpy.controller.reports[batches_before]
    assert batch.bound == 2 and batch.fleet_calls >= 2


def test_two_provisioners_by_arch_and_limits_stop_launches(
    karpy: Karpy, core_v1: Any, namespace: str
) -> None:
    arm, amd = unique("arm"), unique("amd")
    provisioner(karpy.kube, arm, [{"key": wk.ARCH, "operator": "In", "values": ["arm64"]}])
    provisioner(
        karpy.kube,
        amd,
        [{"key": wk.ARCH, "operator": "In", "values": ["amd64"]}],
        limits={"resources": {"cpu": "4"}},
    )
    create_pods(
        core_v1,
        namespace,
        [
            pod_manifest("a", "1", selector={wk.PROVISIONER_NAME: arm}),
            pod_manifest("b", "1", selector={wk.PROVISIONER_NAME: amd}),
        ],
    )
    pods = {p.metadata.name: p for p in wait_for(all_bound(core_v1, namespace, 2), 90, "both bound")}
    assert node_of(core_v1, pods["a"].spec.node_name).metadata.labels[wk.ARCH] == "arm64"
    assert node_of(core_v1, pods["b"].spec.node_name).metadata.labels[wk.ARCH] == "amd64"
    nodes_before = len(core_v1.list_node(label_selector=f"{wk.PROVISIONER_NAME}={amd}").items)
    create_pods(core_v1, namespace, [pod_manifest("big", "7", selector={wk.PROVISIONER_NAME: amd})])

    def limit_event() -> bool:
        events = core_v1.list_namespaced_event("default", field_selector=f"involvedObject.name={amd}").items
        return any(e.reason == "LimitExceeded" for e in events)

    wait_for(limit_event, 60, "LimitExceeded event on the Provisioner")
    assert not core_v1.read_namespaced_pod("big", namespace).spec.node_name
    assert len(core_v1.list_node(label_selector=f"{wk.PROVISIONER_NAME}={amd}").items) == nodes_before


@pytest.mark.slow
def test_thousand_mixed_pods_in_one_batch(karpy: Karpy, core_v1: Any, namespace: str) -> None:
    name = unique("mass")
    provisioner(karpy.kube, name, [])
    selector = {wk.PROVISIONER_NAME: name}
    shapes = [("250m", "256Mi"), ("500m", "512Mi"), ("1", "1Gi"), ("2", "4Gi")]
    before = len(karpy.controller.reports)
    create_pods(
        core_v1, namespace, [pod_manifest(f"p{i}", *shapes[i % 4], selector=selector) for i in range(1000)]
    )
    wait_for(all_bound(core_v1, namespace, 1000), 300, "1,000 pods bound")
    reports = karpy.controller.reports[before:]
    assert sum(r.bound for r in reports) >= 1000
    first = next(r for r in reports if r.pods)
    assert first.pods == 1000 and first.bound == 1000
    assert 0 < first.fleet_calls <= first.option_lists
