"""Shared helpers of the integration tests on the local control plane + moto: the in-process
provisioning controller and extender (`Karpy`; the `karpy` fixture is in conftest.py), Provisioner
and pod builders, waits, and the environment of a `karpy controller` process.

Test modules import helpers from here (the lifecycle proofs' harness is lifecycle_harness.py), never
from each other or from benchmarks. The price file (PRICES, the table shipped in the package) and
`controller_env` / `running_controller` come from hack/localcluster/karpyenv.py, which the benchmarks share.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest

from extender.api.labels import GUARDED_RESOURCE
from extender.cloud.aws.provider import AWSCloudProvider
from extender.provisioning.controller import BatchReport, ProvisioningController
from extender.state import ClusterState
from hack.localcluster.karpyenv import PRICES, controller_env, running_controller
from hack.localcluster.procs import free_port
from tests import builders

__all__ = [
    "PRICES",
    "Karpy",
    "all_bound",
    "batch_report",
    "controller_env",
    "create_pods",
    "free_port",
    "instance_tags",
    "karpy_cli_json",
    "moto_credentials",
    "node_of",
    "pod_manifest",
    "pods_of",
    "provisioner",
    "running_controller",
    "unique",
    "wait_for",
    "wait_for_first_consumer_class",
]


@contextlib.contextmanager
def moto_credentials() -> Iterator[pytest.MonkeyPatch]:
    """moto takes any credentials; boto3 must find one, and never a real one (no session token or
    profile from the machine)."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("AWS_ACCESS_KEY_ID", "testing")
        env.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        env.delenv("AWS_SESSION_TOKEN", raising=False)
        env.delenv("AWS_PROFILE", raising=False)
        yield env


@dataclass
class Karpy:
    controller: ProvisioningController
    state: ClusterState
    cloud: AWSCloudProvider
    kube: Any
    #: Cleared while another controller (a `karpy controller` process) must do the provisioning.
    leading: threading.Event

    @property
    def ec2(self) -> Any:
        return self.cloud.clients.ec2


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def provisioner(kube: Any, name: str, requirements: list[dict[str, Any]], **spec: Any) -> None:
    from kubernetes import client

    body = builders.provisioner_manifest(name) | {"spec": {"requirements": requirements, **spec}}
    client.CustomObjectsApi(kube).create_cluster_custom_object(
        "karpenter.sh", "v1alpha5", "provisioners", body
    )


def nodepool(
    kube: Any,
    name: str,
    cluster: str,
    requirements: list[dict[str, Any]],
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    empty_after: str = "Never",
    disruption: dict[str, Any] | None = None,
    replicas: int | None = None,
    security_groups: list[dict[str, Any]] | None = None,
    **template_spec: Any,
) -> None:
    """A karpenter.sh/v1 NodePool and the EC2NodeClass of the same name it uses (AL2023, the
    cluster's tagged subnets and security groups, the local cluster's instance profile), whose empty
    nodes go `empty_after` after they empty (WhenEmpty), unless `disruption` replaces that block;
    `template_spec` fields (terminationGracePeriod, expireAfter, startupTaints) join
    spec.template.spec; `labels` and `annotations` go in spec.template.metadata; `replicas` makes
    it a static NodePool; `security_groups` replaces the node class's securityGroupSelectorTerms."""
    from kubernetes import client

    objects = client.CustomObjectsApi(kube)
    tagged = [{"tags": {f"kubernetes.io/cluster/{cluster}": "*"}}]
    objects.create_cluster_custom_object(
        "karpenter.k8s.aws",
        "v1",
        "ec2nodeclasses",
        {
            "apiVersion": "karpenter.k8s.aws/v1",
            "kind": "EC2NodeClass",
            "metadata": {"name": name},
            "spec": {
                "instanceProfile": "karpy-node",
                "amiSelectorTerms": [{"alias": "al2023@latest"}],
                "subnetSelectorTerms": tagged,
                "securityGroupSelectorTerms": security_groups or tagged,
            },
        },
    )
    template_spec = {
        "requirements": requirements,
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": name},
        **template_spec,
    }
    disruption = disruption or {"consolidationPolicy": "WhenEmpty", "consolidateAfter": empty_after}
    objects.create_cluster_custom_object(
        "karpenter.sh",
        "v1",
        "nodepools",
        builders.nodepool_manifest(
            name,
            template_spec=template_spec,
            labels=labels or None,
            annotations=annotations or None,
            disruption=disruption,
            **({} if replicas is None else {"replicas": replicas}),
        ),
    )


def wait_for_first_consumer_class(kube: Any, name: str, provisioner_name: str, **fields: Any) -> Any:
    """Create a StorageClass binding WaitForFirstConsumer (plus `fields`, e.g. allowedTopologies);
    the StorageV1Api that made it."""
    from kubernetes import client

    storage = client.StorageV1Api(kube)
    storage.create_storage_class(
        {
            "metadata": {"name": name},
            "provisioner": provisioner_name,
            "volumeBindingMode": "WaitForFirstConsumer",
            **fields,
        }
    )
    return storage


def pod_manifest(name: str, cpu: str, memory: str = "64Mi", selector: dict[str, str] | None = None) -> dict:
    """An inflate pod (pause, no grace period) for `create_namespaced_pod`: no namespace of its own."""
    return builders.pod_manifest(
        name,
        namespace=None,
        uid="",
        labels={"app": "inflate"},
        container="pause",
        image="registry.k8s.io/pause:3.9",
        cpu=cpu,
        memory=memory,
        terminationGracePeriodSeconds=0,
        nodeSelector=selector or {},
    )


def guarded(manifest: dict[str, Any]) -> dict[str, Any]:
    """`manifest` with its first container requesting `karpy.sh/guarded`: the shipped scheduler
    config sends only such pods to karpy's extender (docs/scheduler-path.md)."""
    container = manifest["spec"]["containers"][0]
    resources = container.setdefault("resources", {})
    for kind in ("requests", "limits"):
        resources.setdefault(kind, {})[GUARDED_RESOURCE] = "1"
    return manifest


def create_pods(core: Any, namespace: str, manifests: list[dict], parallel: int = 1) -> None:
    if parallel == 1:
        for manifest in manifests:
            core.create_namespaced_pod(namespace, manifest)
        return
    with ThreadPoolExecutor(parallel) as pool:
        list(pool.map(lambda m: core.create_namespaced_pod(namespace, m), manifests))


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


def batch_report(
    karpy: Karpy, before: Sequence[BatchReport], match: Callable[[BatchReport], bool]
) -> BatchReport:
    """The first batch report not in `before` (`list(karpy.controller.reports)` taken earlier) that
    matches; a report lands after its binds. By identity, not by index: the controller keeps its
    last 100 reports, so past 100 batches an index taken before would never see a new one."""
    seen = {id(r) for r in before}  # `before` holds them, so no id is reused meanwhile
    return wait_for(
        lambda: next((r for r in karpy.controller.reports if id(r) not in seen and match(r)), None),
        10,
        "batch report",
    )


def instance_tags(karpy: Karpy, node: Any) -> dict[str, str]:
    instance_id = node.spec.provider_id.rsplit("/", 1)[-1]
    reservations = karpy.ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
    return {t["Key"]: t["Value"] for t in reservations[0]["Instances"][0].get("Tags", [])}


def karpy_cli_json(cluster: Any, monkeypatch: Any, capsys: Any, *argv: str) -> Any:
    """`karpy ARGV -o json` run in-process, live against the local cluster with the environment a
    `karpy controller` of it has (prices from PRICES); the JSON it printed."""
    import json

    from extender.cli.main import main

    for key, value in controller_env(cluster.state, "127.0.0.1:0").items():
        monkeypatch.setenv(key, value)
    capsys.readouterr()
    code = main([*argv, "-o", "json", "--kubeconfig", cluster.kubeconfig, "--prices", str(PRICES)])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)
