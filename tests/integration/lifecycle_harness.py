"""The lifecycle proofs' harness, shared by test_lifecycle and test_consolidation: karpy's
provisioning controller, extender and lifecycle workers in this process against the local cluster
(the `karpy` fixture), and the helpers that read what the API server and EC2 say."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest
from werkzeug.serving import make_server

from extender.api import labels as wk
from extender.cloud.aws.instancetypes import CatalogProvider
from extender.cloud.aws.provider import AWSCloudProvider
from extender.cloud.metrics import decorate
from extender.cluster.boundpods import BoundPods
from extender.heartbeat import Heartbeats
from extender.http.app import create_app
from extender.lifecycle.context import Context, utcnow
from extender.lifecycle.controller import LifecycleController
from extender.lifecycle.events import Recorder
from extender.provisioning.controller import ProvisioningController
from extender.settings import (
    BatchingSettings,
    LeaderElectionSettings,
    LifecycleSettings,
    Settings,
)
from extender.state import ClusterState
from tests.integration.helpers import (
    PRICES,
    moto_credentials,
    pod_manifest,
    wait_for,
)
from tests.integration.helpers import Karpy as ProvisioningKarpy
from tests.integration.helpers import provisioner as create_provisioner

GC_GRACE = 8.0


class Extender:
    """The in-process extender on the port kube-scheduler calls; `handed_over` lends that port to
    a `karpy controller` process, so kube-scheduler consults the replica's own guard and claims."""

    def __init__(self, port: int, app: Any) -> None:
        self.port, self.app = port, app
        self._start()

    def _start(self) -> None:
        self.server = make_server("127.0.0.1", self.port, self.app, threaded=True)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    @contextlib.contextmanager
    def handed_over(self) -> Iterator[int]:
        self.stop()
        try:
            yield self.port
        finally:
            self._start()


class OffsetClock:
    """The lifecycle's clock: real UTC time plus `offset`, so a test can stand at a chosen "now"
    (a budget's schedule window) while time still passes."""

    def __init__(self) -> None:
        self.offset = timedelta()

    def __call__(self) -> datetime:
        return utcnow() + self.offset

    def stand_at(self, hour: int, minute: int) -> None:
        """Move "now" forward to the next hh:mm UTC (never backwards: node ages stay positive, and
        times the lifecycle stamped with this clock stay in its past). The next hh:mm after the
        clock's own now, not the real one: from a real 00:05, stand_at(0, 2) then stand_at(0, 12)
        went to tomorrow 00:02 and back to today 00:12."""
        now = self()
        target = now.replace(hour=hour, minute=minute, second=0, microsecond=0)
        if target <= now:
            target += timedelta(days=1)
        self.offset += target - now


@contextlib.contextmanager
def clock_ahead(harness: Karpy) -> Iterator[None]:
    """Lets a test stand the lifecycle's clock a day or so ahead of the API server's and moto's
    timestamps. The jump must not read as age: a replacement node seen before kwok marked it Ready
    looked a day old and was terminated as "failed to join" (a CI run at 00:52 UTC), and an instance
    seen before its Node exists would look past the GC grace."""
    lifecycle = harness.settings.lifecycle
    saved = lifecycle.registration_ttl_seconds, lifecycle.gc_grace_seconds
    lifecycle.registration_ttl_seconds = lifecycle.gc_grace_seconds = 2 * 86400.0
    try:
        yield
    finally:
        harness.clock.offset = type(harness.clock.offset)()
        lifecycle.registration_ttl_seconds, lifecycle.gc_grace_seconds = saved


class CacheClock:
    """The cloud provider's cache timer: time.monotonic() plus `offset`, only ever moved forward, so
    a test can age the provider's caches (SSM parameters and AMIs: 60 s) instead of waiting them out
    in real time. Moving forward only: an entry stamped on it never outlives its TTL."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += seconds


@dataclass
class Karpy(ProvisioningKarpy):
    """The provisioning module's harness plus the lifecycle's settings, event recorder and extender;
    `clock` is the lifecycle's."""

    settings: Settings
    recorder: Recorder
    extender: Extender
    clock: OffsetClock = field(default_factory=OffsetClock)
    #: The lifecycle's threads and state (a test may read what its workers hold).
    lifecycle: LifecycleController | None = None
    #: The cloud provider's cache timer (`CacheClock`).
    cache_clock: CacheClock = field(default_factory=CacheClock)


def make_settings(cluster: Any, aws_endpoint: str | None = None) -> Settings:
    """`aws_endpoint`: where karpy calls AWS, when not the cluster's moto itself (a fault proxy)."""
    seed = cluster.aws
    endpoint = {"endpoint_url": aws_endpoint} if aws_endpoint else {}
    return Settings(
        cluster_name=cluster.state.get("cluster_name", seed.cluster_name),
        cluster_endpoint=cluster.apiserver_url,
        kubeconfig=cluster.kubeconfig,
        aws=seed.aws_settings(price_file=str(PRICES), default_instance_profile="karpy-node", **endpoint),
        batching=BatchingSettings(idle_seconds=1.0, max_seconds=10.0),
        lifecycle=LifecycleSettings(
            gc_grace_seconds=GC_GRACE,
            gc_interval_seconds=2.0,
            sqs_wait_seconds=1,
            replacement_wait_seconds=60.0,
        ),
        leader_election=LeaderElectionSettings(
            enabled=False,
            namespace="kube-system",
            lease_duration_seconds=4,
            renew_deadline_seconds=3,
            retry_period_seconds=0.5,
        ),
    )


@pytest.fixture(scope="module")
def karpy(cluster: Any, provisioner_crd: str, shared_catalog: CatalogProvider) -> Iterator[Karpy]:
    with moto_credentials():
        yield from _karpy(cluster, catalog=shared_catalog)


def _karpy(
    cluster: Any, kube: Any = None, aws_endpoint: str | None = None, catalog: CatalogProvider | None = None
) -> Iterator[Karpy]:
    """`kube` and `aws_endpoint` put something between karpy and the cluster (a fault proxy);
    `catalog`: the session's instance types (conftest's `shared_catalog`), else its own."""
    kube = kube or cluster.api_client()
    settings = make_settings(cluster, aws_endpoint)
    cache_clock = CacheClock()
    raw_cloud = AWSCloudProvider(settings=settings, timer=cache_clock, catalog=catalog)
    cloud = decorate(raw_cloud)
    state = ClusterState()
    leading = threading.Event()
    leading.set()
    # Wired as extender/main.py wires `karpy controller`, with leadership in the test's hands.
    bound = BoundPods()
    controller = ProvisioningController(
        settings=settings, kube=kube, cloud=cloud, state=state, bound=bound, is_leader=leading.is_set
    )
    recorder = Recorder(kube)
    clock = OffsetClock()
    ctx = Context(
        settings=settings,
        kube=kube,
        cloud=cloud,
        state=state,
        provisioning=controller,
        recorder=recorder,
        is_leader=leading.is_set,
        unavailable=controller.mark_unavailable,
        clock=clock,
    )
    # The interruption poller, as extender/main.py wires it when a queue is configured.
    sqs = raw_cloud.clients.sqs if settings.aws.interruption_queue else None
    lifecycle = LifecycleController(ctx, bound=bound, heartbeats=Heartbeats(), sqs=sqs)
    stop = threading.Event()
    lifecycle.start(stop)
    bound.start(kube, stop)
    controller.start(stop)
    extender = Extender(cluster.extender_port, create_app(settings, state, controller.enqueue))
    try:
        yield Karpy(
            controller,
            state,
            raw_cloud,
            kube,
            leading,
            settings,
            recorder,
            extender,
            clock,
            lifecycle=lifecycle,
            cache_clock=cache_clock,
        )
    finally:
        # Give up leadership first: a watch or queue thread still unwinding acts only as a leader,
        # so it cannot launch, disrupt or collect in the next module's cluster state.
        leading.clear()
        stop.set()
        extender.stop()


@pytest.fixture
def lifecycle_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG, logger="karpy.lifecycle")
    caplog.set_level(logging.INFO, logger="karpy")
    return caplog


# -- helpers ---------------------------------------------------------------------------------------


def provisioner(kube: Any, name: str, requirements: list[dict[str, Any]], **spec: Any) -> None:
    create_provisioner(kube, name, requirements, provider={"instanceProfile": "karpy-node"}, **spec)


def deployment(
    apps: Any,
    namespace: str,
    name: str,
    prov: str,
    replicas: int,
    cpu: str = "1",
    annotations: dict[str, str] | None = None,
    affinity: dict[str, Any] | None = None,
    owner_label: str = wk.PROVISIONER_NAME,
) -> None:
    """`replicas` pods selecting `prov` by `owner_label` (`karpenter.sh/nodepool` for a NodePool)."""
    template = pod_manifest(name, cpu, selector={owner_label: prov})
    template["metadata"] = {"labels": {"app": name}, "annotations": annotations or {}}
    if affinity:
        template["spec"]["affinity"] = affinity
    apps.create_namespaced_deployment(
        namespace,
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": template["metadata"], "spec": template["spec"]},
            },
        },
    )


def live_pods(core: Any, namespace: str, app: str) -> list[Any]:
    return [
        p
        for p in core.list_namespaced_pod(namespace, label_selector=f"app={app}").items
        if p.metadata.deletion_timestamp is None
    ]


def bound_node(core: Any, namespace: str, app: str) -> str:
    """The node the app's pods are bound to, once they all are (90 s at most)."""
    pods = wait_for(
        lambda: (ps := live_pods(core, namespace, app)) and all(p.spec.node_name for p in ps) and ps,
        90,
        f"{app} bound",
    )
    return str(pods[0].spec.node_name)


def available(core: Any, namespace: str, app: str) -> int:
    return sum(
        1
        for p in live_pods(core, namespace, app)
        if any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
    )


def node_or_none(core: Any, name: str) -> Any:
    from kubernetes.client.exceptions import ApiException

    try:
        return core.read_node(name)
    except ApiException as err:
        if err.status == 404:
            return None
        raise


def moved_off(core: Any, namespace: str, app: str, node: str) -> Any:
    """A wait_for check: the app's 2 pods bound to nodes other than `node`, and both available."""

    def check() -> Any:
        pods = live_pods(core, namespace, app)
        return (
            len(pods) == 2
            and all(p.spec.node_name and p.spec.node_name != node for p in pods)
            and available(core, namespace, app) == 2
            and pods
        )

    return check


def instance_of(node: Any) -> str:
    return node.spec.provider_id.rsplit("/", 1)[-1]


def instance_state(karpy: Karpy, instance_id: str) -> str:
    reservations = karpy.ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
    return reservations[0]["Instances"][0]["State"]["Name"]


def messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records]


def ready_untainted(core: Any, name: str) -> bool:
    node = node_or_none(core, name)
    if node is None or any(t.key == wk.NOT_READY_TAINT_KEY for t in node.spec.taints or []):
        return False
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])
