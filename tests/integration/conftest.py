"""Integration fixtures: the local control plane (hack/localcluster) once per session.

- ``cluster`` (session): brings the proving ground up in a temporary run folder and tears it down
  at the end, unless ``KARPY_CLUSTER_STATE`` names the state.json of an already-running cluster
  (``make cluster-up`` writes .run/cluster/state.json), which is then used and left running.
  Exposes ``kubeconfig`` (path), ``api_client()`` (a new kubernetes ApiClient), ``apiserver_url``,
  ``extender_port``, ``extender_url``, ``aws`` (an AwsSeed for the cluster's moto), ``state`` (the
  raw state dict) and ``run_dir``.
- ``namespace`` (function): a fresh namespace (name returned), its default ServiceAccount present;
  deleted after the test.
- ``core_v1`` / ``apps_v1`` (function): typed APIs bound to a client of ``cluster``.
- ``provisioner_crd`` (session): the Provisioner CRD (manifests/crd/provisioners.karpenter.sh.yaml)
  created or replaced on ``cluster`` and Established; yields the CRD's name.
- ``admission_webhook`` (session): one ``karpy webhook --self-signed`` per worker for tests that only
  send it objects (Karpenter's published examples, v1alpha5 and v1): every CRD installed, the
  process behind webhook configurations for each kind in ``examples_apply.ADMITTED`` that admit only
  objects labelled ``examples_apply.ADMISSION_LABEL``; yields the ``WebhookProcess``.
- ``shared_catalog`` (session): one instance-type catalog (``CatalogProvider``) on the cluster's
  moto for every in-process karpy that calls moto directly (this file's ``karpy`` and
  lifecycle_harness's): the listing costs ~3 CPU-seconds per build (moto's DescribeInstanceTypes
  answer alone ~1.8 s) and no test changes the types, zones or prices behind it.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from werkzeug.serving import make_server

from extender.cloud.aws.instancetypes import CatalogProvider
from extender.cloud.aws.provider import AWSCloudProvider
from extender.cloud.metrics import decorate
from extender.cluster import client as kube_client
from extender.cluster.boundpods import BoundPods
from extender.http.app import create_app
from extender.provisioning.controller import ProvisioningController
from extender.settings import BatchingSettings, LeaderElectionSettings, Settings
from extender.state import ClusterState
from hack.localcluster import awsseed, karpyenv
from hack.localcluster import cluster as localcluster
from hack.localcluster.karpyenv import install_provisioner_crd
from tests.integration.helpers import PRICES, Karpy, moto_credentials

STATE_ENV = "KARPY_CLUSTER_STATE"


@dataclass(frozen=True)
class Cluster:
    state: dict[str, Any]

    @property
    def run_dir(self) -> Path:
        return Path(self.state["run_dir"])

    @property
    def kubeconfig(self) -> str:
        return self.state["kubeconfig"]

    @property
    def apiserver_url(self) -> str:
        return self.state["apiserver_url"]

    @property
    def extender_port(self) -> int:
        return int(self.state["extender_port"])

    @property
    def extender_url(self) -> str:
        return self.state["extender_url"]

    @property
    def aws(self) -> awsseed.AwsSeed:
        return awsseed.AwsSeed.from_dict(self.state["aws"])

    def api_client(self) -> Any:
        return karpyenv.api_client(self.state)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    state_file = os.environ.get(STATE_ENV)
    if state_file:
        yield Cluster(json.loads(Path(state_file).read_text()))
        return
    folder = tmp_path_factory.mktemp("cluster")
    state = localcluster.up(folder, die_with_parent=True, quiet=True)
    try:
        yield Cluster(state)
    finally:
        localcluster.down(folder, quiet=True)


@pytest.fixture(scope="session")
def provisioner_crd(cluster: Cluster) -> str:
    with cluster.api_client() as api:
        return install_provisioner_crd(api)


@pytest.fixture(scope="session")
def admission_webhook(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Tests that never stop or reconfigure their webhook share this one (a gunicorn start each
    module cost seconds); a test that does (test_webhook.py) starts its own."""
    from kubernetes import client

    from tests.integration.examples_apply import ADMISSION_LABEL, ADMITTED, DEFAULT_PROFILE, example_hook
    from tests.integration.test_webhook import WebhookProcess, configuration

    name = f"karpy-admission-{ADMISSION_LABEL['karpy.sh/admission-test']}"
    process = WebhookProcess(
        cluster.kubeconfig,
        tmp_path_factory.mktemp("admission-webhook"),
        config_name=name,
        extra_args=("--default-instance-profile", DEFAULT_PROFILE),
    )
    mutating = example_hook(
        "defaulting.webhook.provisioners.karpenter.sh",
        process.url("/mutate/provisioner"),
        ADMITTED["Provisioner"][:3],
        ADMISSION_LABEL,
    )
    validating = [
        example_hook(
            f"validation.webhook.{plural}.{group}",
            process.url(path),
            (group, version, plural),
            ADMISSION_LABEL,
        )
        for group, version, plural, path in ADMITTED.values()
    ]
    with cluster.api_client() as api_client:
        install_provisioner_crd(api_client)  # every CRD, both API versions
        admission = client.AdmissionregistrationV1Api(api_client)
        # The process patches its CA into both configurations when it starts.
        admission.create_mutating_webhook_configuration(configuration("Mutating", name, [mutating]))
        admission.create_validating_webhook_configuration(configuration("Validating", name, validating))
        try:
            process.start()
            yield process
        finally:
            process.stop()
            admission.delete_mutating_webhook_configuration(name)
            admission.delete_validating_webhook_configuration(name)


@pytest.fixture
def core_v1(cluster: Cluster) -> Iterator[Any]:
    from kubernetes import client

    with cluster.api_client() as api:
        yield client.CoreV1Api(api)


@pytest.fixture
def apps_v1(cluster: Cluster) -> Iterator[Any]:
    from kubernetes import client

    with cluster.api_client() as api:
        yield client.AppsV1Api(api)


@pytest.fixture
def namespace(core_v1: Any) -> Iterator[str]:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    name = f"t-{uuid.uuid4().hex[:10]}"
    core_v1.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    # Pod admission needs the namespace's default ServiceAccount, made by a controller shortly after.
    deadline = time.monotonic() + 30
    while True:
        try:
            core_v1.read_namespaced_service_account("default", name)
            break
        except ApiException as exc:
            if exc.status != 404 or time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    yield name
    try:
        core_v1.delete_namespace(name)
    except ApiException as exc:
        if exc.status != 404:
            raise


def _settings(cluster: Any) -> Settings:
    seed = cluster.aws
    return Settings(
        cluster_name=cluster.state.get("cluster_name", seed.cluster_name),
        cluster_endpoint=cluster.apiserver_url,
        kubeconfig=cluster.kubeconfig,
        aws=seed.aws_settings(
            interruption_queue="", price_file=str(PRICES), default_instance_profile="karpy-node"
        ),
        batching=BatchingSettings(idle_seconds=1.0, max_seconds=10.0),
        leader_election=LeaderElectionSettings(enabled=False),
    )


def _provider(settings: Settings, catalog: CatalogProvider | None = None) -> AWSCloudProvider:
    with moto_credentials():
        return AWSCloudProvider(settings=settings, catalog=catalog)


@pytest.fixture(scope="session")
def shared_catalog(cluster: Cluster) -> CatalogProvider:
    return _provider(_settings(cluster)).catalog


@pytest.fixture(scope="module")
def karpy(cluster: Any, provisioner_crd: str, shared_catalog: CatalogProvider) -> Iterator[Karpy]:
    """The provisioning controller and the extender in this process, against the local cluster."""
    settings = _settings(cluster)
    kube = kube_client.load(settings)
    stop = threading.Event()
    raw_cloud = _provider(settings, shared_catalog)
    state = ClusterState()
    leading = threading.Event()
    leading.set()
    bound = BoundPods()
    controller = ProvisioningController(
        settings=settings,
        kube=kube,
        cloud=decorate(raw_cloud),
        state=state,
        bound=bound,
        is_leader=leading.is_set,
    )
    bound.start(kube, stop)
    controller.start(stop)
    server = make_server(
        "127.0.0.1", cluster.extender_port, create_app(settings, state, controller.enqueue), threaded=True
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield Karpy(controller, state, raw_cloud, kube, leading)
    finally:
        leading.clear()  # a thread still unwinding launches nothing for the next module
        stop.set()
        server.shutdown()
        server.server_close()  # free the extender port for the next module (test_chaos routes it)


@pytest.fixture
def every_pod(cluster: Cluster) -> Iterator[None]:
    """kube-scheduler in docs/scheduler-path.md's every-pod configuration for one test (filter and
    prioritize for every pod); the shipped one (only pods requesting karpy.sh/guarded) after."""
    from hack.localcluster import cluster as localcluster

    localcluster.restart_scheduler(cluster.run_dir, managed=False, prioritize=True)
    try:
        yield
    finally:
        localcluster.restart_scheduler(cluster.run_dir)
