"""manifests/ against the real local API server, and charts/karpy rendered by a real Helm binary.

- Every object in manifests/ is accepted by the API server (server-side apply, dryRun=All: the
  server validates and defaults it, and stores nothing).
- The controller's RBAC, applied for real, grants what karpy calls and nothing next to it
  (SubjectAccessReviews as its ServiceAccount).
- `helm template` of the chart renders the same objects as manifests/ with only clusterName set,
  and each value lands where it should. Helm is built once from the Go module proxy (hack/helm.py).
"""

from __future__ import annotations

import copy
import importlib
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.helpers import wait_for

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "manifests"
CHART = ROOT / "charts" / "karpy"
NAMESPACE = "karpy"
CONTROLLER_SA = f"system:serviceaccount:{NAMESPACE}:karpy-controller"
HELM_ONLY_LABELS = ("app.kubernetes.io/managed-by", "helm.sh/chart")


def load_docs(paths: list[Path]) -> list[dict[str, Any]]:
    return [doc for path in paths for doc in yaml.safe_load_all(path.read_text()) if doc]


def manifest_docs() -> list[dict[str, Any]]:
    return load_docs(sorted(MANIFESTS.rglob("*.yaml")))


def key(obj: dict[str, Any]) -> tuple[str, str, str]:
    meta = obj["metadata"]
    return obj["kind"], meta.get("namespace", ""), meta["name"]


@pytest.fixture(scope="module")
def dynamic(cluster: Any) -> Iterator[Any]:
    from kubernetes.dynamic import DynamicClient

    with cluster.api_client() as api:
        yield DynamicClient(api)


def apply(dynamic: Any, obj: dict[str, Any], *, dry_run: bool) -> dict[str, Any]:
    resource = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
    kwargs: dict[str, Any] = {"field_manager": "karpy-manifest-test", "force_conflicts": True}
    if dry_run:
        kwargs["dry_run"] = "All"
    result = dynamic.server_side_apply(
        resource, body=obj, name=obj["metadata"]["name"], namespace=obj["metadata"].get("namespace"), **kwargs
    )
    return result.to_dict()


def test_every_manifest_is_accepted_by_the_api_server(dynamic: Any) -> None:
    docs = manifest_docs()
    kinds = {doc["kind"] for doc in docs}
    assert {
        "Namespace",
        "CustomResourceDefinition",
        "ClusterRole",
        "Deployment",
        "Service",
        "ConfigMap",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
        "PodDisruptionBudget",
    } <= kinds
    # Namespaced objects need their namespace to exist even for a dry run.
    apply(dynamic, next(d for d in docs if d["kind"] == "Namespace"), dry_run=False)
    deployments = dynamic.resources.get(api_version="apps/v1", kind="Deployment")
    before = {d.metadata.name for d in deployments.get(namespace=NAMESPACE).items}
    for doc in docs:
        stored = apply(dynamic, copy.deepcopy(doc), dry_run=True)
        assert key(stored) == key(doc)
        if doc["kind"] == "Deployment":
            # The server defaulted it (so it was really admitted), e.g. the rollout strategy.
            assert stored["spec"]["strategy"]["type"] == "RollingUpdate"
    # A dry run stores nothing.
    assert {d.metadata.name for d in deployments.get(namespace=NAMESPACE).items} == before


def test_workloads_are_hardened() -> None:
    deployments = [d for d in manifest_docs() if d["kind"] == "Deployment"]
    assert {d["metadata"]["name"] for d in deployments} == {
        "karpy-controller",
        "karpy-webhook",
        "karpy-scheduler",
    }
    for deployment in deployments:
        pod = deployment["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        for container in pod["containers"]:
            context = container["securityContext"]
            assert context["readOnlyRootFilesystem"] is True
            assert context["allowPrivilegeEscalation"] is False
            assert context["capabilities"]["drop"] == ["ALL"]
    controller = next(d for d in deployments if d["metadata"]["name"] == "karpy-controller")
    assert controller["spec"]["replicas"] == 2
    env = {e["name"]: e.get("value") for e in controller["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["KARPY_LEADER_ELECTION_ENABLED"] == "true"
    from extender.settings import from_env

    # Every literal KARPY_* value parses into Settings.
    settings = from_env({k: v for k, v in env.items() if v is not None})
    assert settings.extender.bind == "0.0.0.0:8088" and settings.leader_election.enabled


def test_scheduler_configuration_registers_the_extender() -> None:
    config_map = next(d for d in manifest_docs() if d["kind"] == "ConfigMap")
    config = yaml.safe_load(config_map["data"]["scheduler-config.yaml"])
    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    (extender,) = config["extenders"]
    assert extender["urlPrefix"] == f"http://karpy-extender.{NAMESPACE}.svc:8088/"
    # Only pods requesting karpy.sh/guarded are sent (docs/scheduler-path.md); holds are nominations.
    assert extender["filterVerb"] == "filter" and "prioritizeVerb" not in extender
    assert extender["managedResources"] == [{"name": "karpy.sh/guarded", "ignoredByScheduler": True}]
    assert extender["nodeCacheCapable"] is True and extender["ignorable"] is True
    assert "bindVerb" not in extender


def test_no_rbac_rule_uses_a_wildcard() -> None:
    for doc in manifest_docs():
        for rule in doc.get("rules") or []:
            for field in ("apiGroups", "resources", "verbs", "resourceNames"):
                assert "*" not in (rule.get(field) or []), f"{doc['kind']} {doc['metadata']['name']}: {rule}"


# Kubernetes client calls in the controller's code -> (apiGroup, resource, verb) they need.
_CALL = re.compile(
    r"\.(create|read|get|list|patch|replace|delete)_(namespaced_)?([a-z_]+?)(_for_all_namespaces)?\b"
)
_VERBS = {
    "create": "create",
    "read": "get",
    "get": "get",
    "list": "list",
    "patch": "patch",
    "replace": "update",
    "delete": "delete",
}
_RESOURCES = {
    "node": ("", "nodes"),
    "pod": ("", "pods"),
    "pod_binding": ("", "pods/binding"),
    "pod_status": ("", "pods/status"),
    "pod_eviction": ("", "pods/eviction"),
    "event": ("", "events"),
    "lease": ("coordination.k8s.io", "leases"),
    "daemon_set": ("apps", "daemonsets"),
    "namespace": ("", "namespaces"),
    "persistent_volume_claim": ("", "persistentvolumeclaims"),
    "persistent_volume": ("", "persistentvolumes"),
    "storage_class": ("storage.k8s.io", "storageclasses"),
    "pod_disruption_budget": ("policy", "poddisruptionbudgets"),
    "cluster_custom_object": ("karpenter.sh", "provisioners"),
    "cluster_custom_object_status": ("karpenter.sh", "provisioners/status"),
}
_PLURAL = re.compile(r'^PLURAL = "([a-z]+)"$', re.MULTILINE)
_MODULE_PLURAL = re.compile(r"\b([a-z_]+)\.PLURAL\b")
# Processes that run under other identities: the webhook, and the user's own `karpy status`/`plan`.
_OTHER_IDENTITIES = ("extender/cli/",)


def _controller_calls() -> set[tuple[str, str, str]]:
    needed = set()
    for path in sorted((ROOT / "extender").rglob("*.py")):
        if str(path.relative_to(ROOT)).startswith(_OTHER_IDENTITIES):
            continue
        text = path.read_text()
        # A custom-object call goes to the resource its line names (`nodepool.PLURAL`), else to the
        # one its module's `PLURAL` names (provisioners by default).
        plural = _PLURAL.search(text)
        for line in text.splitlines():
            for verb, _ns, noun, _all in _CALL.findall(line):
                if noun in _RESOURCES:
                    group, resource = _RESOURCES[noun]
                    if noun.startswith("cluster_custom_object"):
                        named = _line_plural(line) or (plural.group(1) if plural else None)
                        resource = resource.replace("provisioners", named or "provisioners")
                    needed.add((group, resource, _VERBS[verb]))
    return needed


def _line_plural(line: str) -> str | None:
    """The plural a call names through an API module's constant (`nodepool.PLURAL`), if any."""
    found = _MODULE_PLURAL.search(line)
    if found is None:
        return None
    module = importlib.import_module(f"extender.api.{found.group(1)}")
    return getattr(module, "PLURAL", None)


def test_rbac_covers_every_api_call_in_the_controller_code() -> None:
    docs = load_docs([MANIFESTS / "rbac" / "controller.yaml"])
    granted = {
        (group, resource, verb)
        for doc in docs
        if doc["kind"] in ("ClusterRole", "Role")
        for rule in doc["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    needed = _controller_calls()
    assert ("", "pods/binding", "create") in needed  # the scan finds calls at all
    assert needed - granted == set()


def _can(
    cluster: Any,
    verb: str,
    resource: str,
    *,
    group: str = "",
    subresource: str = "",
    namespace: str = "",
    name: str = "",
) -> bool:
    from kubernetes import client

    from extender.cluster.client import call_json

    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": CONTROLLER_SA,
            "groups": [
                "system:serviceaccounts",
                f"system:serviceaccounts:{NAMESPACE}",
                "system:authenticated",
            ],
            "resourceAttributes": {
                "verb": verb,
                "group": group,
                "resource": resource,
                "subresource": subresource,
                "namespace": namespace,
                "name": name,
            },
        },
    }
    with cluster.api_client() as api:
        answer = call_json(client.AuthorizationV1Api(api).create_subject_access_review, review)
    return bool(answer["status"].get("allowed"))


@pytest.fixture(scope="module")
def controller_rbac(cluster: Any, dynamic: Any) -> Iterator[None]:
    docs = load_docs([MANIFESTS / "namespace.yaml", MANIFESTS / "rbac" / "controller.yaml"])
    for doc in docs:
        apply(dynamic, doc, dry_run=False)
    # The API server's RBAC authorizer reads roles and bindings from its informers, a moment behind
    # the writes: until one rule of the ClusterRole and one of the Role answer allowed, a review
    # could deny what the manifests grant (or a denial check pass before they count). Kubernetes'
    # e2e tests wait the same way, 5 s (kubernetes/kubernetes test/e2e/framework/auth/helpers.go,
    # WaitForAuthorizationUpdate); twice that on this shared 2-core machine.
    wait_for(
        lambda: (
            _can(cluster, "watch", "pods")
            and _can(cluster, "create", "leases", group="coordination.k8s.io", namespace=NAMESPACE)
        ),
        10,
        "the controller's ClusterRole and Role in the API server's authorizer",
    )
    yield
    for doc in reversed(docs[1:]):  # the namespace may be shared with other tests
        resource = dynamic.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
        resource.delete(name=doc["metadata"]["name"], namespace=doc["metadata"].get("namespace"))


@pytest.mark.parametrize(
    ("verb", "resource", "extra"),
    [
        ("watch", "pods", {}),
        ("create", "pods", {"subresource": "binding", "namespace": "default"}),
        ("create", "pods", {"subresource": "eviction", "namespace": "default"}),
        ("delete", "nodes", {}),
        ("patch", "nodes", {}),
        ("create", "events", {"namespace": "default"}),
        ("list", "provisioners", {"group": "karpenter.sh"}),
        ("patch", "provisioners", {"group": "karpenter.sh", "subresource": "status"}),
        ("list", "nodepools", {"group": "karpenter.sh"}),
        ("patch", "nodepools", {"group": "karpenter.sh", "subresource": "status"}),
        ("watch", "nodeoverlays", {"group": "karpenter.sh"}),
        ("patch", "nodeoverlays", {"group": "karpenter.sh", "subresource": "status"}),
        ("list", "ec2nodeclasses", {"group": "karpenter.k8s.aws"}),
        ("patch", "ec2nodeclasses", {"group": "karpenter.k8s.aws", "subresource": "status"}),
        ("list", "daemonsets", {"group": "apps"}),
        (
            "update",
            "leases",
            {"group": "coordination.k8s.io", "namespace": NAMESPACE, "name": "karpy-controller"},
        ),
        ("create", "leases", {"group": "coordination.k8s.io", "namespace": NAMESPACE}),
        ("patch", "pods", {"namespace": NAMESPACE, "name": "karpy-controller-0"}),
        # A drain still blocked at terminationGracePeriod deletes its pods, as Karpenter v1's
        # terminator does (pkg/controllers/node/termination/terminator/eviction.go).
        ("delete", "pods", {"namespace": "default"}),
        # A deleted NodeClaim terminates its node, held by karpenter.sh/termination until then
        # (kubernetes-sigs/karpenter pkg/controllers/nodeclaim/termination/controller.go).
        ("watch", "nodeclaims", {"group": "karpenter.sh"}),
        ("patch", "nodeclaims", {"group": "karpenter.sh"}),
    ],
)
def test_the_controller_may_do_what_karpy_does(
    cluster: Any, controller_rbac: None, verb: str, resource: str, extra: dict[str, str]
) -> None:
    assert _can(cluster, verb, resource, **extra)


@pytest.mark.parametrize(
    ("verb", "resource", "extra"),
    [
        ("patch", "pods", {"namespace": "default"}),
        ("update", "nodes", {}),
        ("create", "pods", {"namespace": "default"}),
        ("get", "secrets", {"namespace": NAMESPACE}),
        ("update", "provisioners", {"group": "karpenter.sh"}),
        ("delete", "provisioners", {"group": "karpenter.sh"}),
        ("update", "nodepools", {"group": "karpenter.sh"}),
        ("update", "nodeclaims", {"group": "karpenter.sh"}),
        ("patch", "ec2nodeclasses", {"group": "karpenter.k8s.aws"}),
        (
            "update",
            "leases",
            {"group": "coordination.k8s.io", "namespace": NAMESPACE, "name": "kube-scheduler"},
        ),
        (
            "update",
            "leases",
            {"group": "coordination.k8s.io", "namespace": "kube-system", "name": "karpy-controller"},
        ),
        ("create", "deployments", {"group": "apps", "namespace": NAMESPACE}),
        ("patch", "mutatingwebhookconfigurations", {"group": "admissionregistration.k8s.io"}),
    ],
)
def test_the_controller_may_do_nothing_else(
    cluster: Any, controller_rbac: None, verb: str, resource: str, extra: dict[str, str]
) -> None:
    assert not _can(cluster, verb, resource, **extra)


# --- the Helm chart ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def helm() -> str:
    from hack import helm as helm_build

    return str(helm_build.binary())


def render(helm: str, *args: str, namespace: str = NAMESPACE) -> list[dict[str, Any]]:
    result = subprocess.run(
        [helm, "template", "karpy", str(CHART), "--namespace", namespace, "--include-crds", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def _without_labels(obj: dict[str, Any]) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    obj["metadata"].pop("labels", None)
    return obj


def test_the_chart_renders_the_same_objects_as_the_manifests(helm: str) -> None:
    chart = {key(d): d for d in render(helm, "--set", "clusterName=my-cluster")}
    manifests = {key(d): d for d in manifest_docs() if d["kind"] != "Namespace"}
    assert sorted(chart) == sorted(manifests)
    for k, manifest in manifests.items():
        rendered = chart[k]
        assert _without_labels(rendered) == _without_labels(manifest), k
        labels = rendered["metadata"].get("labels") or {}
        assert (manifest["metadata"].get("labels") or {}).items() <= labels.items(), k
        if k[0] != "CustomResourceDefinition":
            assert labels["app.kubernetes.io/part-of"] == "karpy"
            assert set(labels) - {"app.kubernetes.io/name", "app.kubernetes.io/part-of"} == set(
                HELM_ONLY_LABELS
            )


def test_chart_values_land_in_the_objects(helm: str) -> None:
    docs = render(
        helm,
        "--set",
        "clusterName=prod,clusterEndpoint=https://prod.example:443,logLevel=DEBUG",
        "--set",
        "aws.region=eu-west-1,aws.interruptionQueue=prod-interruption",
        "--set",
        "image.repository=registry.example/karpy,image.tag=0.1.0,image.pullPolicy=IfNotPresent",
        "--set",
        "controller.replicas=3,webhook.replicas=1,scheduler.enabled=false",
        namespace="autoscaling",
    )
    objects = {key(d): d for d in docs}
    assert not [k for k in objects if "karpy-scheduler" in k[2]]
    controller = objects[("Deployment", "autoscaling", "karpy-controller")]
    assert controller["spec"]["replicas"] == 3
    container = controller["spec"]["template"]["spec"]["containers"][0]
    assert (container["image"], container["imagePullPolicy"]) == (
        "registry.example/karpy:0.1.0",
        "IfNotPresent",
    )
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["KARPY_CLUSTER_NAME"] == "prod"
    assert env["KARPY_CLUSTER_ENDPOINT"] == "https://prod.example:443"
    assert env["KARPY_AWS_REGION"] == "eu-west-1"
    assert env["KARPY_AWS_INTERRUPTION_QUEUE"] == "prod-interruption"
    assert env["KARPY_LOG_LEVEL"] == "DEBUG"
    assert objects[("Deployment", "autoscaling", "karpy-webhook")]["spec"]["replicas"] == 1
    mutating = objects[("MutatingWebhookConfiguration", "", "karpy-webhook")]
    assert {h["clientConfig"]["service"]["namespace"] for h in mutating["webhooks"]} == {"autoscaling"}
    binding = objects[("ClusterRoleBinding", "", "karpy-controller")]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "karpy-controller", "namespace": "autoscaling"}
    ]


def test_extender_tls_values_reach_the_controller_and_kube_scheduler(helm: str) -> None:
    ca = "LS0tLS1CRUdJTi1leGFtcGxl"
    tls = f"controller.extenderTLS.secretName=karpy-extender-tls,controller.extenderTLS.caBundle={ca}"
    objects = {key(d): d for d in render(helm, "--set", f"clusterName=prod,{tls}")}
    pod = objects[("Deployment", NAMESPACE, "karpy-controller")]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert env["KARPY_EXTENDER_TLS_CERT_FILE"] == f"{mounts['extender-tls']}/tls.crt"
    assert env["KARPY_EXTENDER_TLS_KEY_FILE"] == f"{mounts['extender-tls']}/tls.key"
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["extender-tls"]["secret"]["secretName"] == "karpy-extender-tls"
    # The kubelet's probes speak TLS to the extender port (and skip verification, as kubelets do).
    assert container["readinessProbe"]["httpGet"]["scheme"] == "HTTPS"
    assert container["livenessProbe"]["httpGet"]["scheme"] == "HTTPS"
    scheduler = yaml.safe_load(
        objects[("ConfigMap", NAMESPACE, "karpy-scheduler-config")]["data"]["scheduler-config.yaml"]
    )
    (extender,) = scheduler["extenders"]
    assert extender["urlPrefix"].startswith("https://karpy-extender.karpy.svc:")
    assert extender["enableHTTPS"] is True
    assert extender["tlsConfig"] == {"caData": ca}


def test_extender_tls_without_a_ca_is_refused(helm: str) -> None:
    result = subprocess.run(
        [helm, "template", "karpy", str(CHART), "--set", "clusterName=p,controller.extenderTLS.secretName=s"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "caBundle is required" in result.stderr


def test_the_chart_requires_a_cluster_name(helm: str) -> None:
    result = subprocess.run(
        [helm, "template", "karpy", str(CHART)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode != 0
    assert "clusterName is required" in result.stderr


def test_helm_lint_passes(helm: str) -> None:
    result = subprocess.run(
        [helm, "lint", str(CHART), "--set", "clusterName=my-cluster"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout
