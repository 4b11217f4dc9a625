"""Issue 11's proofs on the local control plane + moto: karpy plans around the pods already running
(on its own nodes and on others), spreads as kube-scheduler would, and leaves alone the pods whose
rules it does not model. Every assertion is on what the API server says: a pod's nodeName and that
node's labels.

The provisioning worker and the extender run in this process (the `karpy` fixture of
test_provisioning). Each test has its own Provisioner and namespace. karpy's nodes keep karpy's
not-ready taint here (no lifecycle runs), so kube-scheduler never places a test's pods itself:
every placement below is karpy's.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from extender.api import labels as wk
from tests.integration.helpers import (
    Karpy,
    all_bound,
    create_pods,
    node_of,
    pod_manifest,
    pods_of,
    provisioner,
    unique,
    wait_for,
    wait_for_first_consumer_class,
)

pytestmark = pytest.mark.integration

ZONE_A, ZONE_B, ZONE_C = "us-west-2a", "us-west-2b", "us-west-2c"
#: Keeps kube-scheduler off the stand-in node of another node group (kwok runs its pods).
RESERVED_TAINT = {"key": "fidelity.karpy.sh/reserved", "value": "true", "effect": "NoSchedule"}
BIG = "m5.2xlarge"  # 8 vCPU: room left beside the pods the tests run


def with_labels(manifest: dict[str, Any], **labels: str) -> dict[str, Any]:
    manifest["metadata"]["labels"] = dict(labels)
    return manifest


def anti_affinity(topology_key: str, **selector: str) -> dict[str, Any]:
    return {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": topology_key, "labelSelector": {"matchLabels": selector}}
            ]
        }
    }


def spread(topology_key: str, **selector: str) -> list[dict[str, Any]]:
    return [
        {
            "maxSkew": 1,
            "topologyKey": topology_key,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": selector},
        }
    ]


def bound_pods(core: Any, namespace: str, names: list[str], timeout: float, what: str) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        pods = {p.metadata.name: p for p in pods_of(core, namespace) if p.metadata.name in names}
        if len(pods) == len(names) and all(p.spec.node_name for p in pods.values()):
            return pods
        return None

    return wait_for(check, timeout, what)


def node_labels(core: Any, pods: dict[str, Any]) -> dict[str, dict[str, str]]:
    """pod name -> the labels of the node the API server says it runs on."""
    cache: dict[str, dict[str, str]] = {}
    result = {}
    for name, pod in pods.items():
        node = pod.spec.node_name
        if node not in cache:
            cache[node] = dict(node_of(core, node).metadata.labels or {})
        result[name] = cache[node]
    return result


@pytest.fixture
def other_node(core_v1: Any) -> Iterator[str]:
    """A Ready node in zone a that is not karpy's (no provisioner label): another node group's.
    kwok plays its kubelet; the reserved taint keeps kube-scheduler away."""
    from kubernetes.client.exceptions import ApiException

    name = unique("nodegroup-a")
    core_v1.create_node(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {
                    wk.MANAGED_BY_LABEL: "true",
                    wk.ZONE: ZONE_A,
                    wk.HOSTNAME: name,
                    wk.ARCH: "amd64",
                    wk.OS: "linux",
                },
            },
            "spec": {"taints": [RESERVED_TAINT]},
            "status": {
                "capacity": {"cpu": "16", "memory": "64Gi", "pods": "110"},
                "allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"},
            },
        }
    )
    yield name
    try:
        core_v1.delete_node(name)
    except ApiException as err:
        if err.status != 404:
            raise


def running_on(core: Any, namespace: str, node: str, names: list[str], **labels: str) -> None:
    """Pods bound straight to `node` (as if another scheduler put them there), Running."""
    for name in names:
        manifest = with_labels(pod_manifest(name, "100m"), **labels)
        manifest["spec"]["nodeName"] = node
        core.create_namespaced_pod(namespace, manifest)

    def running() -> bool:
        pods = [p for p in pods_of(core, namespace) if p.metadata.name in names]
        return len(pods) == len(names) and all(p.status.phase == "Running" for p in pods)

    wait_for(running, 60, f"{names} Running on {node}")


# -- proofs ----------------------------------------------------------------------------------------


def test_a_zone_anti_affinity_against_pods_on_another_node_group_launches_in_another_zone(
    karpy: Karpy, core_v1: Any, namespace: str, other_node: str
) -> None:
    """The db pods run on a node karpy does not own, in zone a; web must not share a zone with
    them. The term is written with the deprecated zone key."""
    name = unique("anti-zone")
    provisioner(karpy.kube, name, [{"key": wk.ZONE, "operator": "In", "values": [ZONE_A, ZONE_B]}])
    running_on(core_v1, namespace, other_node, ["db-0", "db-1"], app="db")
    selector = {wk.PROVISIONER_NAME: name}
    web = [with_labels(pod_manifest(f"web-{i}", "1", selector=selector), app="web") for i in range(2)]
    for manifest in web:
        manifest["spec"]["affinity"] = anti_affinity("failure-domain.beta.kubernetes.io/zone", app="db")
    create_pods(core_v1, namespace, web)
    pods = bound_pods(core_v1, namespace, ["web-0", "web-1"], 90, "web pods bound")
    labels = node_labels(core_v1, pods)
    for pod_name, node in labels.items():
        assert node[wk.ZONE] == ZONE_B, f"{pod_name} landed in {node[wk.ZONE]} beside the db pods"
        assert node["failure-domain.beta.kubernetes.io/zone"] == ZONE_B
        assert node["failure-domain.beta.kubernetes.io/region"] == node[wk.REGION] == "us-west-2"
        assert node["beta.kubernetes.io/instance-type"] == node[wk.INSTANCE_TYPE]
        assert node["beta.kubernetes.io/arch"] == node[wk.ARCH]
        assert node["beta.kubernetes.io/os"] == node[wk.OS]
        assert node[wk.PROVISIONER_NAME] == name


def test_b_hostname_anti_affinity_against_a_pod_on_a_karpy_node_with_room_gets_a_new_node(
    karpy: Karpy, core_v1: Any, namespace: str
) -> None:
    name = unique("anti-host")
    provisioner(karpy.kube, name, [{"key": wk.INSTANCE_TYPE, "operator": "In", "values": [BIG]}])
    selector = {wk.PROVISIONER_NAME: name}
    create_pods(core_v1, namespace, [with_labels(pod_manifest("solo", "1", selector=selector), app="solo")])
    seed = wait_for(all_bound(core_v1, namespace, 1, running=True), 90, "solo Running")[0]
    other = with_labels(pod_manifest("other", "1", selector=selector), app="other")
    other["spec"]["affinity"] = anti_affinity(wk.HOSTNAME, app="solo")
    # A pod without the rule packs onto solo's node: it has room, and karpy uses it.
    plain = with_labels(pod_manifest("plain", "1", selector=selector), app="plain")
    create_pods(core_v1, namespace, [other, plain])
    pods = bound_pods(core_v1, namespace, ["other", "plain"], 90, "other and plain bound")
    assert pods["plain"].spec.node_name == seed.spec.node_name
    assert pods["other"].spec.node_name != seed.spec.node_name
    assert node_of(core_v1, pods["other"].spec.node_name).metadata.labels[wk.PROVISIONER_NAME] == name


def test_c_zone_spread_with_three_pods_already_in_one_zone_sends_new_pods_to_the_others(
    karpy: Karpy, core_v1: Any, namespace: str
) -> None:
    name = unique("spread-zone")
    provisioner(
        karpy.kube,
        name,
        [
            {"key": wk.INSTANCE_TYPE, "operator": "In", "values": [BIG]},
            {"key": wk.ZONE, "operator": "In", "values": [ZONE_A, ZONE_B, ZONE_C]},
        ],
    )
    in_a = {wk.PROVISIONER_NAME: name, wk.ZONE: ZONE_A}
    create_pods(
        core_v1,
        namespace,
        [with_labels(pod_manifest(f"old-{i}", "500m", selector=in_a), app="spread") for i in range(3)],
    )
    old = wait_for(all_bound(core_v1, namespace, 3, running=True), 90, "3 old pods Running in zone a")
    assert {p.spec.node_name for p in old} and len({p.spec.node_name for p in old}) == 1
    new = []
    for i in range(6):
        manifest = with_labels(
            pod_manifest(f"new-{i}", "500m", selector={wk.PROVISIONER_NAME: name}), app="spread"
        )
        manifest["spec"]["topologySpreadConstraints"] = spread(wk.ZONE, app="spread")
        new.append(manifest)
    create_pods(core_v1, namespace, new)
    pods = bound_pods(core_v1, namespace, [f"new-{i}" for i in range(6)], 90, "6 new pods bound")
    zones = Counter(labels[wk.ZONE] for labels in node_labels(core_v1, pods).values())
    # The zone-a node had room for all six; spread sends them to b and c, three each.
    assert zones == Counter({ZONE_B: 3, ZONE_C: 3}), zones


def test_d_spread_on_capacity_type_splits_between_spot_and_on_demand(
    karpy: Karpy, core_v1: Any, namespace: str
) -> None:
    name = unique("spread-ct")
    provisioner(
        karpy.kube,
        name,
        [
            {
                "key": wk.CAPACITY_TYPE,
                "operator": "In",
                "values": [wk.CAPACITY_TYPE_SPOT, wk.CAPACITY_TYPE_ON_DEMAND],
            }
        ],
    )
    manifests = []
    for i in range(4):
        manifest = with_labels(pod_manifest(f"p{i}", "500m", selector={wk.PROVISIONER_NAME: name}), app="ct")
        manifest["spec"]["topologySpreadConstraints"] = spread(wk.CAPACITY_TYPE, app="ct")
        manifests.append(manifest)
    create_pods(core_v1, namespace, manifests)
    pods = bound_pods(core_v1, namespace, [f"p{i}" for i in range(4)], 90, "4 pods bound")
    types = Counter(labels[wk.CAPACITY_TYPE] for labels in node_labels(core_v1, pods).values())
    assert types == Counter({wk.CAPACITY_TYPE_SPOT: 2, wk.CAPACITY_TYPE_ON_DEMAND: 2}), types


def test_e_ephemeral_storage_and_host_port_pods_are_launched_and_bound(
    karpy: Karpy, core_v1: Any, namespace: str
) -> None:
    """Two pods each asking 10Gi of ephemeral storage and host port 8080: one node each."""
    name = unique("storage")
    provisioner(karpy.kube, name, [])
    manifests = []
    for i in range(2):
        manifest = pod_manifest(f"p{i}", "250m", selector={wk.PROVISIONER_NAME: name})
        container = manifest["spec"]["containers"][0]
        container["resources"]["requests"]["ephemeral-storage"] = "10Gi"
        container["ports"] = [{"containerPort": 80, "hostPort": 8080, "protocol": "TCP"}]
        manifests.append(manifest)
    create_pods(core_v1, namespace, manifests)
    pods = bound_pods(core_v1, namespace, ["p0", "p1"], 90, "ephemeral-storage + hostPort pods bound")
    assert pods["p0"].spec.node_name != pods["p1"].spec.node_name, "two pods share host port 8080"
    from extender.api.quantity import parse_quantity

    for pod in pods.values():
        allocatable = node_of(core_v1, pod.spec.node_name).status.allocatable or {}
        assert parse_quantity(allocatable.get("ephemeral-storage", "0")) >= 10 * 2**30


def test_f_unmodelled_pods_get_an_event_and_are_never_bound(
    karpy: Karpy, core_v1: Any, namespace: str
) -> None:
    name = unique("unmodelled")
    provisioner(karpy.kube, name, [])
    selector = {wk.PROVISIONER_NAME: name}
    claim = pod_manifest("claim", "250m", selector=selector)
    claim["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    claim["spec"]["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    fields = pod_manifest("fields", "250m", selector=selector)
    fields["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["nowhere"]}]}
                ]
            }
        }
    }
    plain = pod_manifest("plain", "250m", selector=selector)
    create_pods(core_v1, namespace, [claim, fields, plain])

    def karpy_events(pod: str) -> list[Any]:
        events = core_v1.list_namespaced_event(namespace, field_selector=f"involvedObject.name={pod}").items
        return [e for e in events if e.source and e.source.component == "karpy"]

    for pod, field in (("claim", "spec.volumes[0]"), ("fields", "matchFields")):
        (event,) = wait_for(lambda pod=pod: karpy_events(pod), 60, f"karpy's Event on {pod}")
        assert event.type == "Warning" and event.reason == "UnmodelledRule"
        assert field in event.message, event.message
    # The rest of the batch went on.
    plain_bound = bound_pods(core_v1, namespace, ["plain"], 60, "plain bound")["plain"]
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        for pod in ("claim", "fields"):
            assert not core_v1.read_namespaced_pod(pod, namespace).spec.node_name, f"{pod} was bound"
        time.sleep(0.5)
    # Nothing launched for them: the Provisioner's only node is plain's.
    nodes = core_v1.list_node(label_selector=f"{wk.PROVISIONER_NAME}={name}").items
    assert [n.metadata.name for n in nodes] == [plain_bound.spec.node_name]
    assert all(len(karpy_events(pod)) == 1 for pod in ("claim", "fields"))


def test_g_a_claim_bound_to_a_zonal_volume_gets_capacity_in_that_zone_and_a_waiting_claim_is_nominated(
    karpy: Karpy, core_v1: Any, namespace: str
) -> None:
    """VolumeBinding (kube-scheduler): a pod whose claim is bound may only run where the volume's
    node affinity allows; a claim a WaitForFirstConsumer class has yet to provision is provisioned
    in PreBind, which karpy's own bind would skip, so that pod gets a node (its room held there,
    a Nominated Event) and is left to kube-scheduler, which cannot place it here (karpy's
    not-ready taint stays: no lifecycle runs)."""

    name = unique("volumes")
    provisioner(karpy.kube, name, [])
    wffc = f"{name}-wffc"
    storage = wait_for_first_consumer_class(karpy.kube, wffc, "example.com/none")
    pv = f"{name}-pv"
    core_v1.create_persistent_volume(
        {
            "metadata": {"name": pv},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "",
                "hostPath": {"path": "/tmp/karpy-test"},
                "claimRef": {"namespace": namespace, "name": "zonal"},
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": wk.ZONE, "operator": "In", "values": [ZONE_C]}]}
                        ]
                    }
                },
            },
        }
    )
    try:
        for claim, spec in (
            ("zonal", {"storageClassName": "", "volumeName": pv}),
            ("later", {"storageClassName": wffc}),
        ):
            core_v1.create_namespaced_persistent_volume_claim(
                namespace,
                {
                    "metadata": {"name": claim},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "1Gi"}},
                        **spec,
                    },
                },
            )
        wait_for(
            lambda: (
                core_v1.read_namespaced_persistent_volume_claim("zonal", namespace).status.phase == "Bound"
            ),
            60,
            "the static claim bound by the PV controller",
        )
        selector = {wk.PROVISIONER_NAME: name}
        manifests = []
        for pod_name, claim in (("zonal-user", "zonal"), ("later-user", "later")):
            manifest = pod_manifest(pod_name, "250m", selector=selector)
            manifest["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
            manifests.append(manifest)
        create_pods(core_v1, namespace, manifests)
        pods = bound_pods(core_v1, namespace, ["zonal-user"], 90, "the pod of the bound claim bound")
        assert node_labels(core_v1, pods)["zonal-user"][wk.ZONE] == ZONE_C

        def reported() -> list[Any]:
            events = core_v1.list_namespaced_event(
                namespace, field_selector="involvedObject.name=later-user"
            ).items
            return [e for e in events if e.source and e.source.component == "karpy"]

        (event,) = wait_for(reported, 60, "karpy's Event on the pod whose claim waits for provisioning")
        assert event.reason == "Nominated" and "WaitForFirstConsumer" in event.message, event.message
        assert karpy.state.held(f"{namespace}/later-user") is not None
        assert not core_v1.read_namespaced_pod("later-user", namespace).spec.node_name
    finally:
        core_v1.delete_persistent_volume(pv)
        storage.delete_storage_class(wffc)


def test_h_a_pod_counted_by_a_spread_joins_its_zone_and_binds_after_it(
    karpy: Karpy, core_v1: Any, namespace: str
) -> None:
    """Issue 24: kube-scheduler's PodTopologySpread checks only the incoming pod's own constraints
    (podtopologyspread/filtering.go). A pod the spreading pod counts, pinned to the spreader's
    zone, is bound there after it (main refused it: "would break the topology spread of pods
    placed there"); the spreader is not refused at its re-check either."""
    name = unique("spread-join")
    provisioner(
        karpy.kube,
        name,
        [
            {"key": wk.INSTANCE_TYPE, "operator": "In", "values": [BIG]},
            {"key": wk.ZONE, "operator": "In", "values": [ZONE_A, ZONE_B, ZONE_C]},
        ],
    )
    # The larger pod gets its domain first (karpy takes pods by size), so the joiner comes after it.
    spreader = with_labels(pod_manifest("spreader", "1", selector={wk.PROVISIONER_NAME: name}), app="web")
    spreader["spec"]["topologySpreadConstraints"] = spread(wk.ZONE, app="web")
    joiner = with_labels(
        pod_manifest("joiner", "500m", selector={wk.PROVISIONER_NAME: name, wk.ZONE: ZONE_A}), app="web"
    )
    create_pods(core_v1, namespace, [spreader, joiner])
    pods = bound_pods(core_v1, namespace, ["spreader", "joiner"], 90, "both pods bound")
    zones = {pod: labels[wk.ZONE] for pod, labels in node_labels(core_v1, pods).items()}
    assert zones == {"spreader": ZONE_A, "joiner": ZONE_A}, zones
    # In one batch: neither pod is refused at its re-check nor left for a later batch.
    warnings = [
        f"{e.involved_object.name}: {e.reason} {e.message}"
        for e in core_v1.list_namespaced_event(namespace).items
        if e.source and e.source.component == "karpy" and e.type == "Warning"
    ]
    assert not warnings, warnings
