"""Issue 31 on the local control plane, both halves of isolation.

1. Objects the loaders refuse, stored straight into the CRDs (the integration cluster installs the
   CRDs without karpy's webhook, as a webhook-less or upgraded cluster holds them), are each skipped
   with one `ValidationFailed` Event naming the field and Ready=False, launch nothing, and never
   stall the plain pool beside them.
2. A launch refused downstream backs only its pool off. Loader-valid input can no longer make
   kube-apiserver refuse a Node or EC2 refuse a launch, so the project's fault proxy
   (hack/localcluster/faultproxy.py) stands between karpy and each and answers the upstream's own
   refusal for one chosen pool: kube-apiserver's 422 Invalid (annotations past 256 KiB) to its
   Node create, EC2's TagLimitExceeded to its CreateFleet. Everything else is forwarded.

karpy's provisioning and lifecycle run in this process (lifecycle_harness), through the proxies;
the test itself talks to the cluster and moto directly.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from extender.api import labels as wk
from extender.cluster import v1status
from hack.localcluster.chaos import _apiserver_pool, _kubeconfig
from hack.localcluster.faultproxy import Fault, FaultProxy, Request, aws_service, ec2_error, invalid
from tests.integration import lifecycle_harness
from tests.integration.helpers import nodepool, pod_manifest, unique, wait_for
from tests.integration.lifecycle_harness import Karpy, bound_node, deployment, node_or_none

pytestmark = pytest.mark.integration

#: How long a refused pool's pod is watched after its first refusal: within the 60 s backoff.
WATCH_SECONDS = 40.0
ON_DEMAND = [{"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}]
# apimachinery's ValidateAnnotations: field.TooLong(path, "", TotalAnnotationSizeLimitB).
TOO_LONG = "Too long: may not be more than 262144 bytes"
TAG_LIMIT = ec2_error(400, "TagLimitExceeded", "The maximum number of Tags for a resource has been reached.")
NODE_CLASSES = ("karpenter.k8s.aws", "v1", "ec2nodeclasses")
NODE_POOLS = ("karpenter.sh", "v1", "nodepools")


def refused_node(name: str) -> Fault:
    return invalid("Node", name, "metadata.annotations", "FieldValueTooLong", TOO_LONG)


class Refusals:
    """The proxies in front of kube-apiserver and moto, and the pools whose Node create (`nodes`)
    or CreateFleet (`fleets`) they refuse."""

    def __init__(self, cluster: Any) -> None:
        self.nodes: set[str] = set()
        self.fleets: set[str] = set()
        self.apiserver = FaultProxy(
            lambda: cluster.apiserver_url, self._apiserver, pool=_apiserver_pool(cluster.state)
        )
        self.moto = FaultProxy(lambda: cluster.aws.endpoint_url, self._ec2)

    @staticmethod
    def _names(request: Request, pools: set[str]) -> bool:
        return any(pool.encode() in request.body for pool in set(pools))

    def _apiserver(self, request: Request) -> Fault | None:
        creates_node = request.method == "POST" and urlsplit(request.path).path == "/api/v1/nodes"
        if creates_node and self._names(request, self.nodes):
            return refused_node(json.loads(request.body)["metadata"]["name"])
        return None

    def _ec2(self, request: Request) -> Fault | None:
        fleet = aws_service(request) == "ec2" and b"Action=CreateFleet" in request.body
        return TAG_LIMIT if fleet and self._names(request, self.fleets) else None

    def close(self) -> None:
        self.apiserver.close()
        self.moto.close()


@pytest.fixture(scope="module")
def refusals(cluster: Any) -> Iterator[Refusals]:
    proxies = Refusals(cluster)
    yield proxies
    proxies.close()


@pytest.fixture(scope="module")
def karpy(
    cluster: Any, provisioner_crd: str, refusals: Refusals, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Karpy]:
    """lifecycle_harness's karpy, talking to kube-apiserver and moto through `refusals`."""
    kubeconfig = _kubeconfig(tmp_path_factory.mktemp("isolation") / "kubeconfig", refusals.apiserver.url)
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    with lifecycle_harness.moto_credentials():
        yield from lifecycle_harness._karpy(
            cluster, kube=client.ApiClient(configuration), aws_endpoint=refusals.moto.url
        )


@pytest.fixture(scope="module")
def admin(cluster: Any) -> Any:
    """The test's own client, straight to kube-apiserver."""
    return cluster.api_client()


@pytest.fixture
def controller_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="karpy")
    return caplog


def pool_instances(karpy: Karpy, pool: str) -> list[dict[str, Any]]:
    found = karpy.ec2.describe_instances(Filters=[{"Name": f"tag:{wk.NODEPOOL}", "Values": [pool]}])
    return [i for r in found["Reservations"] for i in r["Instances"]]


def instances_state(karpy: Karpy, pool: str) -> set[str]:
    return {i["State"]["Name"] for i in pool_instances(karpy, pool)}


def events_of(core: Any, kind: str, name: str, namespace: str = "default") -> list[Any]:
    """Events about an object (a cluster-scoped one's are in `default`, as karpy records them)."""
    selector = f"involvedObject.kind={kind},involvedObject.name={name}"
    return core.list_namespaced_event(namespace, field_selector=selector).items


def condition(kube: Any, resource: tuple[str, str, str], name: str, kind: str) -> dict[str, Any] | None:
    obj = client.CustomObjectsApi(kube).get_cluster_custom_object(*resource, name)
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind), None)


def live_pods_named(core: Any, namespace: str, name: str) -> list[Any]:
    return [p for p in core.list_namespaced_pod(namespace).items if p.metadata.name == name]


def launch_errors(pool: str, code: str) -> float:
    from prometheus_client import REGISTRY

    found = REGISTRY.get_sample_value("karpy_launch_errors_total", {"provisioner": pool, "code": code})
    return found or 0.0


def errors_about(caplog: pytest.LogCaptureFixture, name: str) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.levelname == "ERROR" and f" {name}," in r.getMessage()
    ]


def tracebacks(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.exc_info]


def delete_pools(admin: Any, *names: str) -> None:
    objects = client.CustomObjectsApi(admin)
    for name in names:
        for resource in (NODE_POOLS, NODE_CLASSES):
            try:
                objects.delete_cluster_custom_object(*resource, name)
            except ApiException as err:
                if err.status != 404:
                    raise


def wait_event(core: Any, kind: str, name: str, reason: str, limit: float = 60) -> Any:
    def found() -> list[Any]:
        return [e for e in events_of(core, kind, name) if e.reason == reason]

    return wait_for(found, limit, f"{kind} {name}'s {reason} Event")[0]


@dataclass
class World:
    """What a refusal test works with: karpy (through the proxies), the test's own clients, its
    namespace and karpy's log."""

    karpy: Karpy
    admin: Any
    core: Any
    apps: Any
    namespace: str
    log: pytest.LogCaptureFixture


@pytest.fixture
def world(
    karpy: Karpy,
    admin: Any,
    core_v1: Any,
    apps_v1: Any,
    namespace: str,
    controller_log: pytest.LogCaptureFixture,
) -> World:
    return World(karpy, admin, core_v1, apps_v1, namespace, controller_log)


def test_stored_hostile_objects_are_skipped_by_name_and_the_plain_pool_carries_on(world: World) -> None:
    karpy, admin, core_v1, apps_v1, namespace = (
        world.karpy,
        world.admin,
        world.core,
        world.apps,
        world.namespace,
    )
    controller_log = world.log
    cluster = karpy.settings.cluster_name
    huge, big, tags, plain = unique("np-huge"), unique("np-big"), unique("np-tags"), unique("np-plain")
    # The CRD's pattern admits 99999999999h; Go's time.Duration stops at about 2562047h.
    nodepool(
        admin, huge, cluster, ON_DEMAND, expireAfter="99999999999h", terminationGracePeriod="99999999999h"
    )
    nodepool(admin, big, cluster, ON_DEMAND, annotations={"example.com/big": "x" * 1_000_000})
    nodepool(admin, tags, cluster, ON_DEMAND)
    patch = {"spec": {"tags": {f"team-{i}": "x" for i in range(60)}}}  # EC2 allows 50 per instance
    client.CustomObjectsApi(admin).patch_cluster_custom_object(*NODE_CLASSES, tags, patch)
    nodepool(admin, plain, cluster, ON_DEMAND, empty_after="2s")
    try:
        for pool in (huge, big, tags):
            core_v1.create_namespaced_pod(namespace, pod_manifest(pool, "1", selector={wk.NODEPOOL: pool}))
        deployment(apps_v1, namespace, "plain", plain, 1, owner_label=wk.NODEPOOL)

        expected = {
            ("NodePool", huge): [
                "spec.template.spec.expireAfter",
                "spec.template.spec.terminationGracePeriod",
            ],
            ("NodePool", big): ["spec.template.metadata.annotations"],
            ("EC2NodeClass", tags): ["spec.tags", "60 tags"],
            ("NodePool", tags): [f'EC2NodeClass "{tags}" is invalid'],
        }
        for (kind, name), fields in expected.items():
            event = wait_event(core_v1, kind, name, "ValidationFailed")
            assert all(f in event.message for f in fields), (kind, name, event.message)
            assert event.type == "Warning"

        # The plain pool's pod is bound and its emptied node removed meanwhile.
        plain_node = bound_node(core_v1, namespace, "plain")
        apps_v1.delete_namespaced_deployment("plain", namespace)
        wait_for(
            lambda: node_or_none(core_v1, plain_node) is None, 60, "the plain pool's emptied node removed"
        )

        readiness = {
            (NODE_POOLS, huge): "ValidationFailed",
            (NODE_POOLS, big): "ValidationFailed",
            (NODE_CLASSES, tags): "ValidationFailed",
            (NODE_POOLS, tags): "NodeClassNotReady",
        }
        # One status pass, as extender/main.py runs it every minute (the harness runs none).
        v1status.refresh(karpy.kube, karpy.cloud.node_class_status, karpy.settings)
        for (resource, name), reason in readiness.items():
            ready = condition(admin, resource, name, "Ready")
            assert ready and (ready["status"], ready["reason"]) == ("False", reason), (resource, name, ready)

        for pool in (huge, big, tags):
            assert pool_instances(karpy, pool) == [], f"an instance launched for {pool}"
            (pod,) = live_pods_named(core_v1, namespace, pool)
            assert not pod.spec.node_name
        print({name: len(pool_instances(karpy, name)) for name in (huge, big, tags)})
        # One Event and one ERROR line each, however many listings passed.
        for kind, name in expected:
            found = [e for e in events_of(core_v1, kind, name) if e.reason == "ValidationFailed"]
            assert [e.count for e in found] == [1], (kind, name)
        for name in (huge, big, tags):
            assert len(errors_about(controller_log, name)) == (2 if name == tags else 1), name
        (pool_error,) = [m for m in errors_about(controller_log, tags) if "nodepool" in m]
        assert f'EC2NodeClass "{tags}" is invalid' in pool_error and "not found" not in pool_error
        assert tracebacks(controller_log) == []
    finally:
        delete_pools(admin, huge, big, tags, plain)


def test_kube_apiservers_own_refusal_is_what_the_proxy_answers(admin: Any, core_v1: Any) -> None:
    """The injected 422 is kube-apiserver's: the real one refuses a Node with 300 KB of annotations
    with the same Status (reason Invalid, code 422, the field in details.causes)."""
    name = unique("too-long")
    body = {"metadata": {"name": name, "annotations": {"example.com/big": "x" * 300_000}}}
    with pytest.raises(ApiException) as refused:
        core_v1.create_node(body)
    assert refused.value.status == 422
    real = json.loads(refused.value.body)
    injected = refused_node(name)
    assert injected.status == 422
    assert json.loads(injected.body) == real


@contextlib.contextmanager
def refused_pool(world: World, refused: set[str], prefix: str) -> Iterator[tuple[str, float]]:
    """A pool the proxies refuse (added to `refused`) with a pod of its own, waited for until its
    first LaunchFailed Event; then a plain pool's pod, bound meanwhile. Yields the pool and when
    its first refusal was seen."""
    pool, plain = unique(prefix), unique("np-plain")
    nodepool(world.admin, pool, world.karpy.settings.cluster_name, ON_DEMAND)
    nodepool(world.admin, plain, world.karpy.settings.cluster_name, ON_DEMAND)
    refused.add(pool)
    try:
        pod = pod_manifest(pool, "1", selector={wk.NODEPOOL: pool})
        world.core.create_namespaced_pod(world.namespace, pod)
        wait_event(world.core, "NodePool", pool, "LaunchFailed")
        refused_at = time.monotonic()
        deployment(world.apps, world.namespace, "plain", plain, 1, owner_label=wk.NODEPOOL)
        bound_node(world.core, world.namespace, "plain")
        yield pool, refused_at
    finally:
        refused.discard(pool)
        world.apps.delete_namespaced_deployment("plain", world.namespace)
        delete_pools(world.admin, pool, plain)


def assert_backed_off(world: World, pool: str, refusal: str) -> None:
    """One LaunchFailed Event on the pool (saying `refusal`) and one on its pod, which waits
    unbound; NodeRegistrationHealthy=False; no traceback."""
    (event,) = events_of(world.core, "NodePool", pool)
    assert event.reason == "LaunchFailed" and refusal in event.message, event.message
    (pod,) = live_pods_named(world.core, world.namespace, pool)
    assert not pod.spec.node_name
    assert any(e.reason == "LaunchFailed" for e in events_of(world.core, "Pod", pool, world.namespace))
    health = wait_for(
        lambda: condition(world.admin, NODE_POOLS, pool, "NodeRegistrationHealthy"), 30, "the condition"
    )
    assert (health["status"], health["reason"]) == ("False", "LaunchFailed")
    assert tracebacks(world.log) == []


def test_a_node_the_apiserver_refuses_is_terminated_and_its_pool_backed_off(
    world: World, refusals: Refusals
) -> None:
    """kube-apiserver refuses the pool's Node (422, annotations too long): its instance is
    terminated, and no other is launched for the pod while the pool is backed off."""
    karpy = world.karpy
    with refused_pool(world, refusals.nodes, "np-refused") as (pool, refused_at):
        assert len(pool_instances(karpy, pool)) == 1
        time.sleep(max(refused_at + WATCH_SECONDS - time.monotonic(), 0))
        instances = pool_instances(karpy, pool)
        node_refusals = refusals.apiserver.faults().get("apiserver 422 Node", 0)
        print(f"in {WATCH_SECONDS:.0f}s: instances {len(instances)}, Node creates refused {node_refusals}")
        assert len(instances) == 1, "launched again while backed off"
        assert node_refusals == 1
        gone = {"shutting-down", "terminated"}
        wait_for(lambda: instances_state(karpy, pool) <= gone, 30, "the refused node's instance terminated")
        assert_backed_off(world, pool, TOO_LONG)


def test_an_ec2_refusal_for_good_backs_only_its_pool_off(world: World, refusals: Refusals) -> None:
    """EC2 refuses the pool's CreateFleet with TagLimitExceeded: one refused launch and no
    instance; the pod waits without another try while backed off."""
    with refused_pool(world, refusals.fleets, "np-denied") as (pool, refused_at):
        time.sleep(max(refused_at + WATCH_SECONDS - time.monotonic(), 0))
        tries = launch_errors(pool, "TagLimitExceeded")
        fleet_refusals = refusals.moto.faults().get(TAG_LIMIT.kind, 0)
        print(f"in {WATCH_SECONDS:.0f}s: launches refused {tries:.0f}, CreateFleet refused {fleet_refusals}")
        assert tries == 1 and fleet_refusals == 1
        assert pool_instances(world.karpy, pool) == []
        assert_backed_off(world, pool, "TagLimitExceeded")
