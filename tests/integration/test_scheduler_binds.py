"""Issue 24's "two ways to place a pod" on the local control plane + moto: pods whose binding
kube-scheduler must do (claims bound on the chosen node, matchFields, dynamic resource
allocation) get a node from karpy, which holds their room there, and kube-scheduler binds them.
Every assertion is on what the API server shows (pods, claims, nodes, Events), except the hold
itself, which lives in karpy's ClusterState.

The provisioning worker and the extender run in this process (the `karpy` fixture); no lifecycle
runs, so `ready_nodes` drops karpy's not-ready taint from Ready nodes as the lifecycle's readiness
worker would: only then may kube-scheduler place pods on them.
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from extender.api import labels as wk
from extender.api.resources import Resources
from hack.localcluster import build
from tests.integration.helpers import (
    Karpy,
    create_pods,
    pod_manifest,
    pods_of,
    provisioner,
    unique,
    wait_for,
    wait_for_first_consumer_class,
)

pytestmark = pytest.mark.integration

ZONE_B, ZONE_C = "us-west-2b", "us-west-2c"
#: Launch (CreateFleet on moto), Node create, kwok's Ready, then kube-scheduler's retry and bind.
BIND_SECONDS = 90


@pytest.fixture
def ready_nodes(core_v1: Any) -> Iterator[None]:
    """Drop karpy's not-ready taint from karpy's Ready nodes while the test runs."""
    stop = threading.Event()

    def untaint() -> None:
        while not stop.wait(0.5):
            for node in core_v1.list_node(label_selector=wk.PROVISIONER_NAME).items:
                taints = node.spec.taints or []
                ready = any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])
                if ready and any(t.key == wk.NOT_READY_TAINT_KEY for t in taints):
                    kept = [
                        {"key": t.key, "value": t.value, "effect": t.effect}
                        for t in taints
                        if t.key != wk.NOT_READY_TAINT_KEY
                    ]
                    core_v1.patch_node(node.metadata.name, {"spec": {"taints": kept or None}})

    thread = threading.Thread(target=untaint, name="untaint", daemon=True)
    thread.start()
    yield
    stop.set()
    thread.join(timeout=5)


def karpy_events(core: Any, namespace: str, pod: str) -> list[Any]:
    events = core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={pod}").items
    return [e for e in events if e.source and e.source.component == "karpy"]


def event(core: Any, namespace: str, pod: str, reason: str, timeout: float = BIND_SECONDS) -> Any:
    def found() -> Any:
        return next((e for e in karpy_events(core, namespace, pod) if e.reason == reason), None)

    return wait_for(found, timeout, f"karpy's {reason} Event on {pod}")


def provisioner_nodes(core: Any, name: str) -> list[Any]:
    return core.list_node(label_selector=f"{wk.PROVISIONER_NAME}={name}").items


def running(core: Any, namespace: str, count: int) -> Callable[[], list[Any]]:
    def check() -> list[Any]:
        pods = pods_of(core, namespace)
        ok = len(pods) == count and all(p.spec.node_name and p.status.phase == "Running" for p in pods)
        return pods if ok else []

    return check


def statefulset(
    apps: Any,
    namespace: str,
    provisioner_name: str,
    storage_class: str,
    replicas: int = 3,
    policy: str = "OrderedReady",
) -> None:
    """StatefulSet `db`: `replicas` replicas (`policy`: OrderedReady or Parallel) of the Provisioner,
    each with claim data-db-<i> of `storage_class` from its volumeClaimTemplates."""
    template = pod_manifest("db", "250m", selector={wk.PROVISIONER_NAME: provisioner_name})
    template["metadata"]["labels"] = {"app": "db"}
    template["spec"]["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    apps.create_namespaced_stateful_set(
        namespace,
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": "db"},
            "spec": {
                "replicas": replicas,
                "podManagementPolicy": policy,
                "serviceName": "db",
                "selector": {"matchLabels": {"app": "db"}},
                "template": {"metadata": template["metadata"], "spec": template["spec"]},
                "volumeClaimTemplates": [
                    {
                        "metadata": {"name": "data"},
                        "spec": {
                            "accessModes": ["ReadWriteOnce"],
                            "storageClassName": storage_class,
                            "resources": {"requests": {"storage": "1Gi"}},
                        },
                    }
                ],
            },
        },
    )


def claims_of(core: Any, namespace: str) -> list[Any]:
    return core.list_namespaced_persistent_volume_claim(namespace).items


def scheduling_messages(core: Any, namespace: str) -> dict[str, str]:
    """Pod name -> the message of its PodScheduled condition (why kube-scheduler left it pending)."""
    return {
        p.metadata.name: next(
            (c.message or "" for c in p.status.conditions or [] if c.type == "PodScheduled"), ""
        )
        for p in pods_of(core, namespace)
    }


def replicas_run_in(core: Any, namespace: str, zone: str, replicas: int = 3) -> list[Any]:
    """Wait for the replicas to Run; each on a node of `zone`, each claim Bound. The pods."""
    # OrderedReady: the replicas start one after another, each after the previous Runs.
    try:
        pods = wait_for(
            running(core, namespace, replicas), replicas * BIND_SECONDS, f"{replicas} replicas Running"
        )
    except AssertionError as err:
        raise AssertionError(f"{err}; kube-scheduler said: {scheduling_messages(core, namespace)}") from None
    assert {core.read_node(p.spec.node_name).metadata.labels[wk.ZONE] for p in pods} == {zone}
    claims = claims_of(core, namespace)
    assert sorted(c.metadata.name for c in claims) == [f"data-db-{i}" for i in range(replicas)]
    assert all(c.status.phase == "Bound" for c in claims)
    return pods


def static_volumes(core: Any, name: str, storage_class: str, zone: str, count: int) -> list[str]:
    """`count` statically provisioned 1Gi volumes of `storage_class`, with node affinity to `zone`;
    their names."""
    in_zone = {"matchExpressions": [{"key": wk.ZONE, "operator": "In", "values": [zone]}]}
    volumes = [f"{name}-pv-{i}" for i in range(count)]
    for pv in volumes:
        core.create_persistent_volume(
            {
                "metadata": {"name": pv},
                "spec": {
                    "capacity": {"storage": "1Gi"},
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": storage_class,
                    "hostPath": {"path": f"/tmp/{pv}"},
                    "nodeAffinity": {"required": {"nodeSelectorTerms": [in_zone]}},
                },
            }
        )
    return volumes


def nominated_with_a_launch(core: Any, namespace: str, pods: list[Any]) -> Any:
    """The first replica found no node: karpy launched one and left the bind to kube-scheduler."""
    nominated = event(core, namespace, "db-0", "Nominated", timeout=5)
    assert "kube-scheduler binds it" in nominated.message and "WaitForFirstConsumer" in nominated.message
    assert any(f"node {p.spec.node_name}, launched for it" in nominated.message for p in pods)
    return nominated


def static_statefulset_runs_in_zone_c(
    karpy: Karpy,
    core: Any,
    apps: Any,
    namespace: str,
    replicas: int,
    policy: str = "OrderedReady",
    types: tuple[str, ...] = (),
    **class_fields: Any,
) -> None:
    """StatefulSet `db` of `replicas` (`policy`) on a new WaitForFirstConsumer class (`class_fields`
    added, e.g. allowedTopologies) of static no-provisioner volumes, one per replica with node
    affinity to zone c, launched on a Provisioner of `types` (any when empty): every replica Runs
    in zone c with its claim Bound to one of them, karpy launched for the first and holds no room
    once they are bound."""
    name = unique("sts")
    only = [{"key": wk.INSTANCE_TYPE, "operator": "In", "values": list(types)}] if types else []
    provisioner(karpy.kube, name, only)
    local = f"{name}-local"
    storage = wait_for_first_consumer_class(karpy.kube, local, "kubernetes.io/no-provisioner", **class_fields)
    volumes = static_volumes(core, name, local, ZONE_C, replicas)
    try:
        statefulset(apps, namespace, name, local, replicas=replicas, policy=policy)
        pods = replicas_run_in(core, namespace, ZONE_C, replicas=replicas)
        assert sorted(c.spec.volume_name for c in claims_of(core, namespace)) == volumes
        nominated_with_a_launch(core, namespace, pods)
        assert not any(karpy.state.held(f"{namespace}/{p.metadata.name}") for p in pods)
    finally:
        apps.delete_namespaced_stateful_set("db", namespace)
        for pv in volumes:
            core.delete_persistent_volume(pv)
        storage.delete_storage_class(local)


def test_a_statefulset_on_static_wait_for_first_consumer_volumes_runs_in_their_zone(
    karpy: Karpy, core_v1: Any, apps_v1: Any, namespace: str, ready_nodes: None
) -> None:
    """3 replicas, volumeClaimTemplates on a WaitForFirstConsumer class of statically provisioned
    volumes (kubernetes.io/no-provisioner), 3 PVs with node affinity to zone c: karpy launches in
    zone c, kube-scheduler's VolumeBinding binds each claim to a PV, every pod Runs there."""
    static_statefulset_runs_in_zone_c(karpy, core_v1, apps_v1, namespace, 3)


@pytest.fixture
def every_node_cordoned(core_v1: Any) -> Iterator[None]:
    """Cordon every node there is now (uncordoned again after the test): only new capacity takes pods."""
    cordoned = [n.metadata.name for n in core_v1.list_node().items if not n.spec.unschedulable]
    for node in cordoned:
        core_v1.patch_node(node, {"spec": {"unschedulable": True}})
    try:
        yield
    finally:
        for node in cordoned:
            core_v1.patch_node(node, {"spec": {"unschedulable": None}})


def test_a_statefulset_on_an_allowed_topologies_class_with_every_node_cordoned_runs_in_its_zone(
    karpy: Karpy, core_v1: Any, apps_v1: Any, namespace: str, ready_nodes: None, every_node_cordoned: None
) -> None:
    """Issue 33: 2 replicas on a WaitForFirstConsumer class with allowedTopologies (zone c) and
    static no-provisioner volumes in zone c, every existing node cordoned. Started together
    (Parallel) on a Provisioner of m5.large, one batch plans both onto one new node in zone c and
    holds their room there; kube-scheduler's filter, which karpy's guard answers, must let each
    replica onto it (was: "0/4 nodes are available: 1 karpy: room reserved for 1 other pod(s), 3
    node(s) were unschedulable", each refused for the other's hold until the deadline)."""
    zone_c = [{"matchLabelExpressions": [{"key": wk.ZONE, "values": [ZONE_C]}]}]
    static_statefulset_runs_in_zone_c(
        karpy, core_v1, apps_v1, namespace, 2, "Parallel", ("m5.large",), allowedTopologies=zone_c
    )


@pytest.fixture
def zonal_provisioner(cluster: Any) -> Iterator[str]:
    """karpy-provisioner (hack/localcluster/gobuild/provisioner, on sig-storage-lib-external-provisioner)
    running against the cluster: it provisions each claim of its WaitForFirstConsumer classes as a
    volume pinned to the zone of the node kube-scheduler selected. Its name is yielded."""
    build.ensure(["provisioner"])
    name = f"karpy.sh/{unique('zonal')}"
    with open(cluster.run_dir / f"{name.replace('/', '-')}.log", "w") as log:
        proc = subprocess.Popen(
            [str(build.binary("karpy-provisioner")), f"--kubeconfig={cluster.kubeconfig}", f"--name={name}"],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            yield name
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


def test_a_statefulset_on_a_dynamically_provisioned_zonal_class_runs_in_its_allowed_zone(
    karpy: Karpy, core_v1: Any, apps_v1: Any, namespace: str, ready_nodes: None, zonal_provisioner: str
) -> None:
    """3 replicas, volumeClaimTemplates on a WaitForFirstConsumer class whose allowedTopologies
    name zone b, served by a real dynamic provisioner: karpy launches in zone b (the class's
    topology), kube-scheduler selects the node, the provisioner creates each volume in that
    node's zone, the PV controller binds the claims, kube-scheduler binds the pods."""
    name = unique("dyn")
    provisioner(karpy.kube, name, [])
    zonal = f"{name}-zonal"
    storage = wait_for_first_consumer_class(
        karpy.kube,
        zonal,
        zonal_provisioner,
        allowedTopologies=[{"matchLabelExpressions": [{"key": wk.ZONE, "values": [ZONE_B]}]}],
    )
    try:
        statefulset(apps_v1, namespace, name, zonal)
        pods = replicas_run_in(core_v1, namespace, ZONE_B)
        for claim in claims_of(core_v1, namespace):
            pv = core_v1.read_persistent_volume(claim.spec.volume_name)
            (term,) = pv.spec.node_affinity.required.node_selector_terms
            assert [(e.key, e.values) for e in term.match_expressions] == [(wk.ZONE, [ZONE_B])]
            annotations = claim.metadata.annotations or {}
            assert annotations.get("volume.kubernetes.io/selected-node") in {p.spec.node_name for p in pods}
        nominated_with_a_launch(core_v1, namespace, pods)
    finally:
        apps_v1.delete_namespaced_stateful_set("db", namespace)
        storage.delete_storage_class(zonal)


def test_c_match_fields_not_in_gets_a_node_kube_scheduler_binds_and_in_gets_an_event(
    karpy: Karpy, core_v1: Any, namespace: str, ready_nodes: None
) -> None:
    """kube-scheduler matches matchFields against the node's name, which karpy does not choose:
    NotIn is met by any new node (karpy launches, kube-scheduler binds); In names nodes, so no
    node karpy launches can meet it (an Event, nothing launched)."""
    name = unique("fields")
    provisioner(karpy.kube, name, [])
    manifests = []
    for pod, operator in (("not-in", "NotIn"), ("in", "In")):
        manifest = pod_manifest(pod, "250m", selector={wk.PROVISIONER_NAME: name})
        manifest["spec"]["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": operator, "values": ["nowhere"]}
                            ]
                        }
                    ]
                }
            }
        }
        manifests.append(manifest)
    create_pods(core_v1, namespace, manifests)
    bound = wait_for(
        lambda: (p := core_v1.read_namespaced_pod("not-in", namespace)).spec.node_name and p,
        BIND_SECONDS,
        "the matchFields NotIn pod bound",
    )
    nominated = event(core_v1, namespace, "not-in", "Nominated", timeout=5)
    assert bound.spec.node_name in nominated.message and "matchFields" in nominated.message
    # Bound by kube-scheduler, not karpy: karpy's Scheduled Event names the Provisioner.
    assert not [e for e in karpy_events(core_v1, namespace, "not-in") if e.reason == "Scheduled"]
    unmodelled = event(core_v1, namespace, "in", "UnmodelledRule")
    assert "matchFields metadata.name In" in unmodelled.message, unmodelled.message
    assert [n.metadata.name for n in provisioner_nodes(core_v1, name)] == [bound.spec.node_name]
    assert not core_v1.read_namespaced_pod("in", namespace).spec.node_name


def test_d_a_pod_kube_scheduler_never_binds_has_its_room_released_at_the_deadline(
    karpy: Karpy, core_v1: Any, namespace: str, ready_nodes: None
) -> None:
    """Dynamic resource allocation (spec.resourceClaims) is not evaluated by karpy: it launches a
    node and holds the pod's room; the claim asks for a device class no driver offers, so
    kube-scheduler never binds the pod and the hold ends at the deadline, with an Event."""
    name = unique("dra")
    provisioner(karpy.kube, name, [])
    driverless_claim(karpy.kube, namespace, f"{name}.example")
    manifest = pod_manifest("dra", "250m", selector={wk.PROVISIONER_NAME: name})
    manifest["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "gpu"}]
    nominations = karpy.controller.nominations
    deadline, nominations.deadline_seconds = nominations.deadline_seconds, 15.0
    try:
        create_pods(core_v1, namespace, [manifest])
        nominated = event(core_v1, namespace, "dra", "Nominated")
        (node,) = [n.metadata.name for n in provisioner_nodes(core_v1, name)]
        assert f"node {node}, launched for it" in nominated.message
        assert "spec.resourceClaims" in nominated.message
        hold = karpy.state.held(f"{namespace}/dra")
        assert hold is not None and hold.node == node and karpy.state.reservation(node)[0] == 1
        released = event(core_v1, namespace, "dra", "NotBoundByScheduler", timeout=60)
        assert released.type == "Warning"
        assert released.message == (
            f"kube-scheduler did not bind the pod within 15s, released the room reserved on node {node}"
        )
        assert karpy.state.held(f"{namespace}/dra") is None
        assert karpy.state.reservation(node) == (0, Resources())
        assert not core_v1.read_namespaced_pod("dra", namespace).spec.node_name
        # Not launched for again while it waited, nor after: the next batch sees the node's room.
        assert len(provisioner_nodes(core_v1, name)) == 1
    finally:
        nominations.deadline_seconds = deadline


def test_e_held_room_is_the_pods_nomination_set_again_when_cleared(
    karpy: Karpy, core_v1: Any, namespace: str, ready_nodes: None
) -> None:
    """docs/scheduler-path.md, step 2: the room karpy holds for a pod kube-scheduler binds is the
    pod's `status.nominatedNodeName`, which kube-scheduler's nominator counts when it filters other
    pods onto the node. The held pod never binds here (its device class has no driver), and
    kube-scheduler clears the field after each failed attempt (preemption finds no candidate:
    `NewPostFilterResultWithNominatedNode("")`); karpy's pending-pod watch sets it again while the
    hold lasts. Whether another pod is kept off is not asserted: an event that requeues both pods
    may run the held pod's failing attempt first, which clears the nomination until karpy sets it
    again (docs/scheduler-path.md, "Limits")."""
    name = unique("nnn")
    provisioner(karpy.kube, name, [{"key": wk.INSTANCE_TYPE, "operator": "In", "values": ["m5.large"]}])
    driverless_claim(karpy.kube, namespace, f"{name}.example")
    selector = {wk.PROVISIONER_NAME: name}
    held = pod_manifest("held", "1", selector=selector)
    held["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "gpu"}]
    create_pods(core_v1, namespace, [held])
    event(core_v1, namespace, "held", "Nominated")
    (node,) = [n.metadata.name for n in provisioner_nodes(core_v1, name)]
    wait_for(
        lambda: not any(t.key == wk.NOT_READY_TAINT_KEY for t in core_v1.read_node(node).spec.taints or []),
        BIND_SECONDS,
        "the node Ready and untainted",
    )
    wait_for(
        lambda: core_v1.read_namespaced_pod("held", namespace).status.nominated_node_name == node,
        30,
        "the held pod nominated to its node",
    )
    # What kube-scheduler does after a failed attempt; karpy nominates the pod again.
    core_v1.patch_namespaced_pod_status("held", namespace, {"status": {"nominatedNodeName": None}})
    wait_for(
        lambda: core_v1.read_namespaced_pod("held", namespace).status.nominated_node_name == node,
        30,
        "the held pod nominated again",
    )
    assert karpy.state.held(f"{namespace}/held") is not None


def driverless_claim(kube: Any, namespace: str, device_class: str) -> None:
    """ResourceClaim `gpu` asking for a device of `device_class`, which no driver offers: a pod
    using it is never bound by kube-scheduler."""
    from kubernetes import client

    client.CustomObjectsApi(kube).create_namespaced_custom_object(
        "resource.k8s.io",
        "v1",
        namespace,
        "resourceclaims",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "gpu"},
            "spec": {
                "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class}}]}
            },
        },
    )
