"""The provisioning controller on a fake apiserver and the in-memory cloud provider: launch,
partial fleets, capacity errors and re-plans, bind conflicts, parking, and the batch's claims."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

import pytest

from extender import retry
from extender.api import labels as wk
from extender.api.provisioner import Taint
from extender.cloud.fake import FakeCloudProvider
from extender.cloud.types import CloudError, InsufficientCapacityError, LaunchRequest, OfferingKey
from extender.cluster import bind as kube_bind
from extender.cluster import nodes as kube_nodes
from extender.cluster.boundpods import BoundPods
from extender.cluster.errors import Unavailable
from extender.provisioning.controller import BatchReport, ProvisioningController
from extender.settings import Settings
from extender.state import ClusterState
from tests.unit.provisioning.fakes import ZONE_A, ZONE_B, Clock, FakeCluster, pending_pod
from tests.unit.scheduling.builders import catalog


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    return FakeCluster(monkeypatch)


@pytest.fixture
def cloud() -> FakeCloudProvider:
    return FakeCloudProvider(catalog=catalog())


def controller_for(
    cloud: FakeCloudProvider,
    *,
    leader: bool = True,
    clock: Clock | None = None,
    state: ClusterState | None = None,
) -> ProvisioningController:
    return ProvisioningController(
        settings=Settings(),
        kube=None,  # type: ignore[arg-type]
        cloud=cloud,
        state=state or ClusterState(),
        bound=BoundPods(),
        is_leader=lambda: leader,
        clock=clock or Clock(),
    )


def big(name: str, **spec: Any) -> dict[str, Any]:
    """A pod that needs a node of its own (hostname anti-affinity against its siblings)."""
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": wk.HOSTNAME, "labelSelector": {"matchLabels": {"app": "solo"}}}
            ]
        }
    }
    return pending_pod(name, labels={"app": "solo"}, affinity=anti, **spec)


def for_provisioner(name: str, provisioner: str) -> dict[str, Any]:
    return pending_pod(name, nodeSelector={wk.PROVISIONER_NAME: provisioner})


def run(controller: ProvisioningController, keys: list[str]) -> Any:
    report = controller.provision(keys)
    controller.pools.drain()
    return report


def test_launch_creates_one_fleet_one_node_and_binds_the_batch(cluster, cloud) -> None:
    keys = [cluster.add_pod(pending_pod(f"web-{i}")) for i in range(3)]
    controller = controller_for(cloud)
    report = run(controller, keys)
    assert cloud.verbs().count("create") == 1
    (node,) = cluster.nodes
    assert cluster.bound == {key: node for key in keys}
    assert (report.pods, report.nodes, report.bound, report.fleet_calls) == (3, 1, 3, 1)
    labels = cluster.nodes[node]["metadata"]["labels"]
    assert (
        labels[wk.PROVISIONER_NAME] == "default"
        and labels[wk.INSTANCE_TYPE] == cloud.requests[0].instance_types[0]
    )
    assert not controller.parked and controller.reports == [report]


def test_the_batchs_nodes_are_held_as_binding_until_the_batch_ends(cluster, cloud, monkeypatch) -> None:
    """Every node of the batch reads `binding` while any pod of the batch binds (readiness keeps
    their not-ready taint meanwhile: docs/scheduler-path.md), none after."""
    keys = [cluster.add_pod(big(f"solo-{i}")) for i in range(2)]
    state = ClusterState()
    seen: list[dict[str, bool]] = []

    def bind(kube: Any, *, namespace: str, name: str, uid: str, node: str) -> None:
        seen.append({n: state.binding(n) for n in cluster.nodes})
        cluster.bind(kube, namespace=namespace, name=name, uid=uid, node=node)

    monkeypatch.setattr(kube_bind, "bind", bind)
    run(controller_for(cloud, state=state), keys)
    assert len(cluster.nodes) == 2 and len(seen) == 2
    assert all(all(held.values()) for held in seen)
    assert not any(state.binding(n) for n in cluster.nodes)


def test_a_batchs_node_reads_binding_before_it_exists(cluster, cloud, monkeypatch) -> None:
    """Marked before the Node is created, not after: kwok (and a fast kubelet) makes a Node Ready
    within milliseconds, and readiness lifted the not-ready taint in the gap between the create and
    the mark (the LaunchedNode Event is written in it), so kube-scheduler placed a pod of the batch
    on the node while karpy bound three others there: 4 + 1 on two c5.xlarge (CI, stop 42)."""
    keys = [cluster.add_pod(big(f"solo-{i}")) for i in range(2)]
    state = ClusterState()
    at_create: dict[str, bool] = {}
    create = cluster.create_node

    def create_node(kube: Any, manifest: dict[str, Any]) -> bool:
        name = manifest["metadata"]["name"]
        at_create[name] = state.binding(name)
        return create(kube, manifest)

    monkeypatch.setattr(kube_nodes, "create_node", create_node)
    run(controller_for(cloud, state=state), keys)
    assert len(at_create) == 2 and all(at_create.values()), at_create
    assert not any(state.binding(n) for n in cluster.nodes)


def test_a_fleet_cut_short_replans_the_pods_of_the_nodes_it_did_not_launch(cluster, cloud) -> None:
    cloud.max_per_launch = 1
    keys = [cluster.add_pod(big(f"solo-{i}")) for i in range(2)]
    controller = controller_for(cloud)
    report = run(controller, keys)
    first, second = cloud.requests
    assert first.count == 2 and second.count == 1
    # The re-plan is a different launch (attempt 1), so EC2's ClientToken does not replay the first.
    assert first.launch_id != second.launch_id
    assert len(cluster.nodes) == 2 and set(cluster.bound) == set(keys)
    assert len(set(cluster.bound.values())) == 2
    assert report.fleet_calls == 2 and report.nodes == 2


def zone_spread_pair() -> tuple[dict[str, Any], dict[str, Any]]:
    """A zone-spreading pod and a pod its spread counts that can only join its zone: kube-scheduler
    binds the second only after the first (podtopologyspread/filtering.go checks the incoming
    pod's own constraints), so karpy must bind them in that order."""
    constraint = {
        "maxSkew": 1,
        "topologyKey": wk.ZONE,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "web"}},
    }
    spreader = pending_pod("spreader", labels={"app": "web"}, topologySpreadConstraints=[constraint])
    joiner = pending_pod("joiner", labels={"app": "web"}, nodeSelector={wk.ZONE: ZONE_A})
    return spreader, joiner


@pytest.mark.parametrize("onto", ["new node", "existing node", "two existing nodes"])
def test_a_pod_of_a_later_bind_phase_binds_after_the_pods_before_it(cluster, cloud, onto) -> None:
    if onto == "existing node":
        cluster.add_node("karpy-a", ZONE_A, karpy=True)
    if onto == "two existing nodes":
        # Room for one pod each: the re-check of the first sees the other node as planned, so the
        # pod of the later phase must not be in that picture yet.
        cluster.add_node("karpy-a", ZONE_A, karpy=True, cpu="1.5")
        cluster.add_node("karpy-a2", ZONE_A, karpy=True, cpu="1.5")
        cluster.add_node("other-b", ZONE_B, karpy=False, cpu="0")
    spreader, joiner = (cluster.add_pod(p) for p in zone_spread_pair())
    # Were the joiner's bind not held back, it would reach the apiserver while the spreader's waits.
    cluster.bind_waits_for[spreader] = joiner
    report = run(controller_for(cloud), [spreader, joiner])
    assert cluster.bind_order == [spreader, joiner] and report.bound == 2
    on = {cluster.nodes[cluster.bound[key]]["metadata"]["labels"][wk.ZONE] for key in (spreader, joiner)}
    assert on == {ZONE_A} and (onto != "new node") == cluster.bound[joiner].startswith("karpy-a")
    assert not [e for e in cluster.events if "not binding" in str(e)]


def refuse_cheapest(request: LaunchRequest) -> InsufficientCapacityError:
    """EC2's answer when the request's cheapest type has no capacity in any zone it allows."""
    cheapest = request.instance_types[0]
    return InsufficientCapacityError(
        "InsufficientInstanceCapacity",
        offerings=[OfferingKey(cheapest, z, c) for z in request.zones for c in request.capacity_types],
    )


def test_a_capacity_error_replans_without_the_refused_offerings(cluster, cloud) -> None:
    key = cluster.add_pod(pending_pod("web"))
    cloud.fail_next("create", refuse_cheapest)
    controller = controller_for(cloud)
    run(controller, [key])
    failed, retried = cloud.requests
    cheapest = failed.instance_types[0]
    assert cheapest not in retried.instance_types and retried.launch_id != failed.launch_id
    assert key in cluster.bound and not controller.parked
    assert {k.instance_type for k in controller.unavailable} == {cheapest}


def test_a_bind_conflict_counts_as_bound_and_a_failed_bind_comes_back(cluster, cloud, monkeypatch) -> None:
    taken, flaky = cluster.add_pod(pending_pod("taken")), cluster.add_pod(pending_pod("flaky"))
    real = cluster.bind

    def bind(kube: Any, *, namespace: str, name: str, uid: str, node: str) -> None:
        if name == "taken":
            raise kube_bind.AlreadyBound("pod ns/taken is already assigned", status=409)
        if name == "flaky":
            raise Unavailable("binding pod ns/flaky: 503 etcd leader changed", status=503)
        real(kube, namespace=namespace, name=name, uid=uid, node=node)

    monkeypatch.setattr(kube_bind, "bind", bind)
    controller = controller_for(cloud)
    report = run(controller, [taken, flaky])
    assert report.bound == 1
    # 409: someone placed the pod; it is not tried again. 503: back through the window, not parked.
    assert flaky in controller.batcher._window.items and taken not in controller.batcher._window.items
    assert flaky not in controller.parked


def test_pods_no_provisioner_takes_are_parked_and_return_after_the_backoff(cluster, cloud) -> None:
    cluster.provisioners = []
    key = cluster.add_pod(pending_pod("web"))
    clock = Clock()
    controller = controller_for(cloud, clock=clock)
    run(controller, [key])
    assert key in controller.parked and "create" not in cloud.verbs()
    assert controller.parked.take() == []
    clock.now += retry.PARKED.ceiling(0)
    assert controller.parked.take() == [key] and key not in controller.parked


def test_parked_again_waits_longer(cloud) -> None:
    clock = Clock()
    controller = controller_for(cloud, clock=clock)
    waits = []
    for _ in range(4):
        controller.parked.park(["ns/web"])
        waits.append(controller.parked.next_in())
        clock.now += retry.PARKED.cap
        assert controller.parked.take() == ["ns/web"]
    assert all(w is not None and w <= retry.PARKED.ceiling(i) for i, w in enumerate(waits))


def test_a_launch_the_cloud_rejects_parks_its_pods_and_tells_the_provisioner(cluster, cloud) -> None:
    key = cluster.add_pod(pending_pod("web"))
    cloud.fail_next(
        "create", CloudError("launch template not found", code="InvalidLaunchTemplateName.NotFound")
    )
    controller = controller_for(cloud)
    run(controller, [key])
    assert key in controller.parked and not cluster.bound
    assert [e["reason"] for e in cluster.events if e["kind"] == "Provisioner"] == ["FailedLaunch"]


def test_a_replica_that_stopped_leading_does_not_launch(cluster, cloud) -> None:
    key = cluster.add_pod(pending_pod("web"))
    controller = controller_for(cloud, leader=False)
    run(controller, [key])
    assert "create" not in cloud.verbs() and key in controller.parked


def test_leadership_gained_during_a_batch_wait_adopts_before_it_provisions(cluster, cloud) -> None:
    """A batch that closes just after this replica became leader is not planned before the
    interrupted launches are adopted (integration: test_instance_launched_before_a_crash_is_adopted,
    where such a batch launched a second node beside the adopted one)."""
    key = cluster.add_pod(pending_pod("web"))
    leader = [False]
    controller = ProvisioningController(
        settings=Settings(),
        kube=None,  # type: ignore[arg-type]
        cloud=cloud,
        state=ClusterState(),
        bound=BoundPods(),
        is_leader=lambda: leader[0],
        clock=Clock(),
    )
    calls: list[str] = []
    stop = threading.Event()
    waits = iter([[key], []])

    def wait(_stop: Any, *_args: Any, idle_return: float, **_kwargs: Any) -> tuple[list[str], float]:
        batch = next(waits, [])
        if batch:
            leader[0] = True  # elected while the window was open
        else:
            stop.set()
        return batch, 0.0

    controller.batcher.wait = wait  # type: ignore[method-assign]
    controller._on_started_leading = lambda: calls.append("adopt")  # type: ignore[method-assign]
    controller.provision = lambda batch: calls.append("provision")  # type: ignore[method-assign,assignment,return-value]
    controller.run(stop)
    assert calls[:1] == ["adopt"], calls
    assert key in controller.parked


def test_an_error_outside_a_batch_does_not_end_the_provisioning_loop(cluster, cloud) -> None:
    """Only the batch was inside the loop's try: an error at leadership start (here from the parked
    pods) ended the provisioning thread for good. Now the pass fails, the start runs again in full,
    and the batch is provisioned."""
    key = cluster.add_pod(pending_pod("web"))
    controller = controller_for(cloud)
    stop = threading.Event()
    real_take, failed = controller.parked.take, []

    def take(everything: bool = False) -> list[str]:
        if not failed:
            failed.append(everything)
            raise RuntimeError("bug")
        return real_take(everything=everything)

    waits = iter([[key]])

    def wait(_stop: Any, idle_return: float) -> tuple[list[str], float]:
        batch = next(waits, [])
        if not batch:
            stop.set()
        return batch, 0.0

    provisioned: list[list[str]] = []
    controller.parked.take = take  # type: ignore[method-assign]
    controller.batcher.wait = wait  # type: ignore[method-assign]
    controller.provision = lambda batch: provisioned.append(list(batch)) or BatchReport()  # type: ignore[method-assign]
    controller.run(stop, backoff=retry.LoopBackoff(rand=lambda: 0.0))
    assert failed == [True] and provisioned == [[key]]


def test_an_api_error_while_adopting_interrupted_launches_is_a_warning(cluster, cloud, caplog) -> None:
    """Issue 26, found while probing: one failed list of instances (the world's fault) was logged at
    ERROR; like every loop's failure it is a WARNING, and karpy's own bugs stay ERRORs."""
    import logging

    controller = controller_for(cloud)

    def list_fails() -> list[Any]:
        raise CloudError("DescribeInstances: RequestLimitExceeded")

    cloud.list = list_fails  # type: ignore[method-assign]
    caplog.set_level(logging.INFO, logger="karpy")
    controller._on_started_leading()
    (record,) = [r for r in caplog.records if "adopting instances" in r.getMessage()]
    assert record.levelno == logging.WARNING


def test_the_lower_bound_is_computed_after_the_binds_off_the_batch(cluster, cloud, monkeypatch) -> None:
    """Issue 26: the plan's lower bound costs about ten times a small batch's solve; the pipeline asks
    for it only once the batch's pods are bound, on the event pool, and logs and reports it."""
    from extender.scheduling import solver

    keys = [cluster.add_pod(pending_pod(f"web-{i}")) for i in range(3)]
    seen: list[tuple[str, int]] = []
    real = solver.plan_bound

    def recorded(*args: Any) -> float:
        seen.append((threading.current_thread().name, len(cluster.bound)))
        return real(*args)

    monkeypatch.setattr(solver, "plan_bound", recorded)
    controller = controller_for(cloud)
    report = run(controller, keys)
    ((thread, bound_then),) = seen
    assert thread.startswith("events") and bound_then == 3
    assert report.lower_bound is not None and 0 < report.lower_bound <= report.planned_price


def test_pods_not_tolerating_a_startup_taint_are_left_to_kube_scheduler(cluster, cloud) -> None:
    """A NodePool startup taint is planned past (Karpenter: pods need not tolerate it) but orders the
    node's start-up: karpy binds the pods that tolerate it and holds the room of the others for
    kube-scheduler, which binds them once it is gone, as it does Karpenter's nominated pods."""
    startup = Taint("node.cilium.io/agent-not-ready", "NoExecute", "true")
    cluster.provisioners = [replace(cluster.provisioners[0], startup_taints=(startup,))]
    agent = pending_pod("agent", tolerations=[{"key": startup.key, "operator": "Exists"}])
    keys = [cluster.add_pod(agent), cluster.add_pod(pending_pod("web"))]
    state = ClusterState()
    controller = controller_for(cloud, state=state)
    report = run(controller, keys)
    tainted = {"key": startup.key, "value": "true", "effect": "NoExecute"}
    assert cluster.nodes and all(tainted in n["spec"]["taints"] for n in cluster.nodes.values())
    (held,) = state.holds()
    assert held.pod.key == "ns/web" and held.node in cluster.nodes
    assert list(cluster.bound) == ["ns/agent"] and cluster.bound["ns/agent"] in cluster.nodes
    assert report.bound == 1 and not controller.parked
    (event,) = [e for e in cluster.events if e["reason"] == "Nominated"]
    assert event["name"] == "web" and event["message"].endswith(
        "kube-scheduler binds it once the node has no startup taint "
        "node.cilium.io/agent-not-ready=true:NoExecute"
    )


def test_an_instance_terminated_while_adoption_waits_is_not_adopted(cluster, cloud) -> None:
    """CI, chaos test (stop 36): the lifecycle's recovery listed the instances, waited for the batch
    lock while the interruption path terminated two instances and deleted their Nodes, then listed
    the Nodes and adopted the terminated instances as new Nodes ("nodes at peak without a live
    instance: 2"). karpy terminates an instance before deleting its Node, so listing the Nodes first
    and the instances second, both under the lock, never sees one without the other."""
    from extender.lifecycle import recovery
    from extender.lifecycle.context import Context
    from extender.lifecycle.events import Recorder

    controller = controller_for(cloud)
    run(controller, [cluster.add_pod(pending_pod("web"))])
    (name,) = cluster.nodes
    (instance,) = cloud.list()
    real_list_nodes, real_list = cluster.list_nodes, cloud.list
    interrupted: list[str] = []

    def interrupt() -> None:  # the interruption path, between adoption's two listings
        if not interrupted:
            interrupted.append(name)
            cloud.delete(instance.id)
            del cluster.nodes[name]

    def list_nodes(*args: Any, **kwargs: Any) -> list[Any]:
        nodes = real_list_nodes(*args, **kwargs)
        interrupt()
        return nodes

    def list_instances() -> list[Any]:
        instances = real_list()
        interrupt()
        return instances

    cluster.monkeypatch.setattr(kube_nodes, "list_nodes", list_nodes)
    cloud.list = list_instances  # type: ignore[method-assign]
    ctx = Context(
        settings=Settings(),
        kube=None,
        cloud=cloud,
        state=None,
        provisioning=controller,
        recorder=Recorder(None),
        clock=lambda: None,  # type: ignore[arg-type,return-value]
    )
    assert recovery.recover(ctx) == []
    assert interrupted == [name] and cluster.nodes == {}
