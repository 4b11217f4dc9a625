"""The admission webhook on the real local control plane.

`karpy webhook --self-signed` runs under gunicorn on 127.0.0.1 with a certificate whose SANs include
127.0.0.1, patches its CA into webhook configurations that use `clientConfig.url` (the API server runs
on the host), and the API server then calls it for Provisioners and for pods in opted-in namespaces.
The Provisioner webhooks carry an objectSelector on this run's label so that other tests sharing the
cluster never pass through this process.
"""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from extender.cli.webhook import local_command
from hack.localcluster.procs import free_port
from tests import builders

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "manifests" / "crd" / "provisioners.karpenter.sh.yaml"
RUN = uuid.uuid4().hex[:8]
CONFIG_NAME = f"karpy-webhook-test-{RUN}"
RUN_LABEL = {"karpy.sh/webhook-test": RUN}
GROUP, VERSION, PLURAL = "karpenter.sh", "v1alpha5", "provisioners"


class WebhookProcess:
    """`python -m extender.cli.main webhook` as a child process, startable and stoppable."""

    def __init__(
        self,
        kubeconfig: str,
        cert_dir: Path,
        *,
        config_name: str = CONFIG_NAME,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        self.kubeconfig = kubeconfig
        self.cert_dir = cert_dir
        self.config_name = config_name
        self.extra_args = extra_args
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = cert_dir / "webhook.log"

    def start(self) -> None:
        args = [
            *local_command(port=self.port, cert_dir=self.cert_dir),
            "--san",
            "localhost",
            "--kubeconfig",
            self.kubeconfig,
            "--cluster-name",
            "demo",
            "--namespace",
            "karpy",
            "--provisioner-cache-seconds",
            "0.2",
            "--patch-mutating",
            self.config_name,
            "--patch-validating",
            self.config_name,
            *self.extra_args,
        ]
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(args, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            try:
                context = ssl.create_default_context(cafile=str(self.cert_dir / "ca.crt"))
                with urllib.request.urlopen(
                    f"https://127.0.0.1:{self.port}/readyz", context=context, timeout=2
                ):
                    return
            except (OSError, ssl.SSLError):
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"webhook did not start: {self.log.read_text()[-2000:]}") from None
                time.sleep(0.2)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=20)
        self.proc = None

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"


def _webhook(name: str, url: str, *, pods: bool) -> dict[str, Any]:
    hook: dict[str, Any] = {
        "name": name,
        "admissionReviewVersions": ["v1"],
        "clientConfig": {"url": url},
        "sideEffects": "None",
    }
    if pods:
        hook |= {
            "failurePolicy": "Ignore",
            "timeoutSeconds": 3,
            "namespaceSelector": {"matchLabels": {"karpenter.sh/provisioning": "enabled"}},
            "rules": [
                {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"], "operations": ["CREATE"]}
            ],
        }
    else:
        hook |= {
            "failurePolicy": "Fail",
            "timeoutSeconds": 10,
            "objectSelector": {"matchLabels": RUN_LABEL},
            "rules": [
                {
                    "apiGroups": [GROUP],
                    "apiVersions": [VERSION],
                    "resources": [PLURAL],
                    "operations": ["CREATE", "UPDATE"],
                }
            ],
        }
    return hook


def _apply_crd(api_client: Any) -> None:
    import yaml
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    ext = client.ApiextensionsV1Api(api_client)
    body = yaml.safe_load(CRD.read_text())
    try:
        ext.create_custom_resource_definition(body)
    except ApiException as err:
        if err.status != 409:
            raise
        current = ext.read_custom_resource_definition(body["metadata"]["name"])
        body["metadata"]["resourceVersion"] = current.metadata.resource_version
        ext.replace_custom_resource_definition(body["metadata"]["name"], body)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        crd = ext.read_custom_resource_definition(body["metadata"]["name"])
        if any(c.type == "Established" and c.status == "True" for c in crd.status.conditions or []):
            return
        time.sleep(0.2)
    raise RuntimeError("CRD not established")


def configuration(kind: str, name: str, hooks: list[dict[str, Any]]) -> dict[str, Any]:
    """A Mutating- or ValidatingWebhookConfiguration named `name` holding `hooks`."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": f"{kind}WebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": hooks,
    }


@pytest.fixture(scope="module")
def webhook(cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebhookProcess]:
    from kubernetes import client

    api_client = cluster.api_client()
    _apply_crd(api_client)
    process = WebhookProcess(cluster.kubeconfig, tmp_path_factory.mktemp("webhook"))
    admission = client.AdmissionregistrationV1Api(api_client)
    admission.create_mutating_webhook_configuration(
        configuration(
            "Mutating",
            CONFIG_NAME,
            [
                _webhook(
                    "defaulting.webhook.provisioners.karpenter.sh",
                    process.url("/mutate/provisioner"),
                    pods=False,
                ),
                _webhook("defaulting.webhook.pods.karpy.sh", process.url("/mutate/pod"), pods=True),
            ],
        )
    )
    admission.create_validating_webhook_configuration(
        configuration(
            "Validating",
            CONFIG_NAME,
            [
                _webhook(
                    "validation.webhook.provisioners.karpenter.sh",
                    process.url("/validate/provisioner"),
                    pods=False,
                )
            ],
        )
    )
    try:
        process.start()
        yield process
    finally:
        process.stop()
        admission.delete_mutating_webhook_configuration(CONFIG_NAME)
        admission.delete_validating_webhook_configuration(CONFIG_NAME)
        objects = client.CustomObjectsApi(api_client)
        for item in objects.list_cluster_custom_object(
            GROUP, VERSION, PLURAL, label_selector=f"karpy.sh/webhook-test={RUN}"
        )["items"]:
            objects.delete_cluster_custom_object(GROUP, VERSION, PLURAL, item["metadata"]["name"])
        api_client.close()


@pytest.fixture
def objects(cluster: Any) -> Iterator[Any]:
    from kubernetes import client

    with cluster.api_client() as api:
        yield client.CustomObjectsApi(api)


def provisioner(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return builders.provisioner_manifest(name) | {
        "metadata": {"name": name, "labels": dict(RUN_LABEL)},
        "spec": spec,
    }


def walkthrough_spec() -> dict[str, Any]:
    return {
        "requirements": [{"key": "node.k8s.aws/capacity-type", "operator": "In", "values": ["spot"]}],
        "provider": {
            "instanceProfile": "KarpenterNodeInstanceProfile-demo",
            "cluster": {"name": "demo", "endpoint": "https://127.0.0.1:6443"},
        },
        "ttlSecondsAfterEmpty": 30,
    }


def test_ca_bundle_was_patched_into_both_configurations(webhook: WebhookProcess, cluster: Any) -> None:
    from kubernetes import client

    with cluster.api_client() as api:
        admission = client.AdmissionregistrationV1Api(api)
        hooks = [
            *admission.read_mutating_webhook_configuration(CONFIG_NAME).webhooks,
            *admission.read_validating_webhook_configuration(CONFIG_NAME).webhooks,
        ]
    ca = (webhook.cert_dir / "ca.crt").read_bytes()
    assert len(hooks) == 3
    assert all(base64.b64decode(h.client_config.ca_bundle) == ca for h in hooks)


def test_walkthrough_provisioner_is_accepted_and_read_back_defaulted(
    webhook: WebhookProcess, objects: Any
) -> None:
    name = f"default-{RUN}"
    objects.create_cluster_custom_object(GROUP, VERSION, PLURAL, provisioner(name, walkthrough_spec()))
    spec = objects.get_cluster_custom_object(GROUP, VERSION, PLURAL, name)["spec"]
    assert spec["requirements"] == [
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
    ]
    assert spec["provider"] == {
        "instanceProfile": "KarpenterNodeInstanceProfile-demo",
        "cluster": {"name": "demo", "endpoint": "https://127.0.0.1:6443"},
        "subnetSelector": {"kubernetes.io/cluster/demo": "*"},
        "securityGroupSelector": {"kubernetes.io/cluster/demo": "*"},
    }
    assert spec["ttlSecondsAfterEmpty"] == 30


def _with(**changes: Any) -> dict[str, Any]:
    return {**walkthrough_spec(), **changes}


ZONE = "topology.kubernetes.io/zone"
INVALID = [
    (
        "operator",
        _with(
            requirements=[
                {"key": ZONE, "operator": "In", "values": ["a"]},
                {"key": ZONE, "operator": "Foo", "values": ["a"]},
            ]
        ),
        'spec.requirements[1].operator: "Foo" not in [In NotIn Exists DoesNotExist Gt Lt]',
    ),
    ("ttl", _with(ttlSecondsAfterEmpty=-1), "spec.ttlSecondsAfterEmpty: cannot be negative"),
    (
        "domain",
        _with(labels={"team.kubernetes.io/x": "a"}),
        'spec.labels["team.kubernetes.io/x"]: label domain',
    ),
    (
        "hostname",
        _with(labels={"kubernetes.io/hostname": "n"}),
        'spec.labels["kubernetes.io/hostname"]: label is',
    ),
    (
        "effect",
        _with(taints=[{"key": "gpu", "effect": "Sometimes"}]),
        'spec.taints[0].effect: "Sometimes" not in',
    ),
    (
        "gt",
        _with(requirements=[{"key": "team", "operator": "Gt", "values": ["a"]}], labels={"team": "1"}),
        "spec.requirements[0].values: operator Gt takes exactly one non-negative integer value",
    ),
    (
        "unknown-key",
        _with(requirements=[{"key": "example.com/x", "operator": "Exists"}]),
        'spec.requirements[0].key: "example.com/x" not in',
    ),
    (
        "profile",
        _with(provider={"cluster": {"name": "demo"}}),
        "spec.provider.instanceProfile: missing required",
    ),
]


@pytest.mark.parametrize(("spec", "expected"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid_provisioner_is_rejected_naming_the_field(
    webhook: WebhookProcess, objects: Any, spec: dict[str, Any], expected: str
) -> None:
    from kubernetes.client.exceptions import ApiException

    name = f"invalid-{uuid.uuid4().hex[:6]}-{RUN}"
    with pytest.raises(ApiException) as err:
        objects.create_cluster_custom_object(GROUP, VERSION, PLURAL, provisioner(name, spec))
    assert err.value.status == 403
    message = json.loads(err.value.body)["message"]
    assert message.startswith(
        'admission webhook "validation.webhook.provisioners.karpenter.sh" denied the request: '
    )
    assert expected in message


#: A pause pod for create_namespaced_pod (no namespace of its own) selecting this run's team; give
#: it a name; keywords as tests.builders.pod_manifest.
team_pod = partial(
    builders.pod_manifest,
    namespace=None,
    uid="",
    image="registry.k8s.io/pause:3.9",
    cpu="100m",
    nodeSelector={"team": f"t{RUN}"},
)


@pytest.fixture
def opted_in(namespace: str, core_v1: Any) -> str:
    core_v1.patch_namespace(namespace, {"metadata": {"labels": {"karpenter.sh/provisioning": "enabled"}}})
    return namespace


@pytest.fixture
def team_provisioner(webhook: WebhookProcess, objects: Any) -> str:
    """A Provisioner only this run's pods fit (they select its `team` label)."""
    name = f"team-{RUN}"
    spec = _with(labels={"team": f"t{RUN}"}, weight=7)
    try:
        objects.create_cluster_custom_object(GROUP, VERSION, PLURAL, provisioner(name, spec))
    except Exception as err:  # created by an earlier test of this module
        if getattr(err, "status", None) != 409:
            raise
    time.sleep(0.5)  # the webhook's Provisioner cache lives 0.2 s
    return name


def test_pod_in_opted_in_namespace_gets_the_fitting_provisioner(
    opted_in: str, team_provisioner: str, core_v1: Any
) -> None:
    created = core_v1.create_namespaced_pod(opted_in, team_pod("web"))
    assert created.spec.node_selector == {
        "team": f"t{RUN}",
        "karpenter.sh/provisioner-name": team_provisioner,
    }


def test_pod_in_other_namespace_is_untouched(namespace: str, team_provisioner: str, core_v1: Any) -> None:
    created = core_v1.create_namespaced_pod(namespace, team_pod("web"))
    assert created.spec.node_selector == {"team": f"t{RUN}"}


def test_pods_are_still_created_with_the_webhook_stopped(
    webhook: WebhookProcess, opted_in: str, core_v1: Any
) -> None:
    webhook.stop()
    try:
        started = time.monotonic()
        created = core_v1.create_namespaced_pod(opted_in, team_pod("while-down"))
        elapsed = time.monotonic() - started
        assert created.metadata.name == "while-down"
        assert "karpenter.sh/provisioner-name" not in (created.spec.node_selector or {})
        assert elapsed < 5, f"pod creation took {elapsed:.1f}s with the webhook down"
    finally:
        webhook.start()


def test_replicas_share_one_self_signed_pair_through_a_secret(namespace: str, core_v1: Any) -> None:
    from webhook.certs import service_hosts
    from webhook.rotation import SecretStore, read_or_create

    hosts = service_hosts("karpy-webhook", namespace)
    # Each replica has its own store of the one Secret.
    first = read_or_create(SecretStore(core_v1, namespace=namespace, name="karpy-webhook-cert"), hosts)
    second = read_or_create(SecretStore(core_v1, namespace=namespace, name="karpy-webhook-cert"), hosts)
    assert second == first
    secret = core_v1.read_namespaced_secret("karpy-webhook-cert", namespace)
    assert secret.type == "kubernetes.io/tls"
    assert base64.b64decode(secret.data["ca.crt"]) == first.ca_pem
