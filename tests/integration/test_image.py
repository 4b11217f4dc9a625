"""karpy run from its container image (`make image`, hack/image.py), as a cluster would run it.

- The image's own settings: uid 65532, entry point `karpy`, a read-only root with /tmp writable.
- The walkthrough with `karpy controller` and `karpy webhook` chrooted into the image's read-only
  root filesystem as uid 65532 (`hack.demo --image`), on a cluster with only the v1alpha5 CRDs (one
  upgraded from Karpenter v0.31): the v1alpha5 Provisioner's run of the suite, with test_demo.py's
  checks (plans, nodes, owner label, TTL window, karpy's log lines; after `down`, no process left);
  no WARNING line from karpy; the webhook patched its caBundle into the webhook configurations;
  then the v1 CRDs are applied and a NodePool gets NodeClaims.
- `helm install` of charts/karpy with the image's reference on a fresh local control plane: every
  object it renders exists, the CRDs are Established, the webhook configurations are there and the
  controller and webhook pods carry the image reference (kwok runs no containers).

Needs root (chroot, mounts) and an image engine; `make test` builds the image first.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from hack import image as karpy_image
from hack.demo import V1ALPHA5_CRDS, crd_files
from hack.demo_objects import nodepool
from hack.localcluster import cluster as localcluster
from hack.localcluster import karpyenv, procs
from tests.integration.test_demo import TTL, assert_nothing_left, assert_walkthrough, run_demo

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="running from the image's filesystem needs root"),
]

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "karpy"


@pytest.fixture(scope="module")
def image() -> karpy_image.Image:
    return karpy_image.build()  # the recorded image when the tree is unchanged


def run_in_image(image: karpy_image.Image, *argv: str) -> subprocess.CompletedProcess[str]:
    with karpy_image.rootfs(image) as root:
        env = karpy_image.image_env(karpy_image.config(image))
        return subprocess.run(
            karpy_image.chroot_argv(root, argv, []), capture_output=True, text=True, env=env, timeout=120
        )


def test_the_image_runs_karpy_as_65532_on_a_read_only_root(image: karpy_image.Image) -> None:
    config = karpy_image.config(image)
    assert config["User"] == "65532:65532"
    assert config["Entrypoint"] == ["karpy"] and config["Cmd"] == ["controller"]
    assert image.size_bytes > 0
    probe = (
        "import os, errno\n"
        "print(os.getuid(), os.getgid())\n"
        "open('/tmp/scratch', 'w').write('ok')\n"
        "try:\n"
        "    open('/opt/karpy/x', 'w')\n"
        "except OSError as err:\n"
        "    print(errno.errorcode[err.errno])\n"
    )
    result = run_in_image(image, "python3", "-c", probe)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["65532", "65532", "EROFS"]
    version = run_in_image(image, *config["Entrypoint"], "version")
    assert version.returncode == 0 and version.stdout.strip(), version.stderr


def _warnings(log: Path) -> list[str]:
    """karpy's WARNING lines (its log fields are tab-separated; gunicorn's are bracketed)."""
    return [
        line
        for line in log.read_text(errors="replace").splitlines()
        if re.search(r"(\s|\[)WARNING(\s|\])", line)
    ]


def _wait(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := check():
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


@pytest.mark.slow
def test_walkthrough_from_the_image_on_a_v1alpha5_only_cluster(
    tmp_path: Path, image: karpy_image.Image
) -> None:
    from kubernetes import client

    run_dir = tmp_path / "run"
    summary_path = tmp_path / "summary.json"
    demo = [sys.executable, "-m", "hack.demo", "--run-dir", str(run_dir)]
    try:
        summary, output = run_demo(
            run_dir, summary_path, "--image", "--crds", "v1alpha5", "--ttl", str(TTL), "--keep"
        )
        assert f"from image {image.ref}" in output
        # The Provisioner's walkthrough, checked as test_demo.py checks the NodePool's.
        assert_walkthrough(summary, output, "v1alpha5")
        # `karpy status` without --metrics found the controller (its KARPY_EXTENDER_METRICS_BIND);
        # the bound itself is computed for consolidating Provisioners only (this one has a TTL).
        assert "POD STARTUP (creation to bound / Ready; controller metrics)" in output
        assert "no controller metrics" not in output
        assert not re.search(r"\b\d{5,}Ki\b", output), "memory shown in Ki"

        logs = run_dir / "logs"
        controller_log = logs / "karpy-controller.log"
        # Issue 32: `Watching nodeclaims failed, re-listing in 20.6s, (404)` every 20-25 s.
        assert _warnings(controller_log) == [] and _warnings(logs / "karpy-webhook.log") == []
        # Only the v1alpha5 CRDs: karpy waits for NodeClaims to be served instead of failing to watch.
        assert (
            "Not watching nodeclaims until nodeclaims.karpenter.sh/v1 is served" in controller_log.read_text()
        )

        # The webhook (in the image) patched its CA into the configurations the demo created.
        state = json.loads((run_dir / "state.json").read_text())
        api = karpyenv.api_client(state)
        ca = (run_dir / "karpy" / "webhook-certs" / "ca.crt").read_bytes()
        admission = client.AdmissionregistrationV1Api(api)
        for config in (
            admission.read_mutating_webhook_configuration("karpy-webhook"),
            admission.read_validating_webhook_configuration("karpy-webhook"),
        ):
            assert {base64.b64decode(h.client_config.ca_bundle) for h in config.webhooks} == {ca}

        # Karpenter v0.31's published AWSNodeTemplates name no instanceProfile: they rely on the default
        # instance profile its getting-started install sets, as the demo does (awsseed's profile).
        custom = client.CustomObjectsApi(api)
        selector = {f"kubernetes.io/cluster/{state['cluster_name']}": "*"}
        template = {
            "apiVersion": "karpenter.k8s.aws/v1alpha1",
            "kind": "AWSNodeTemplate",
            "metadata": {"name": "published-example"},
            "spec": {"subnetSelector": selector, "securityGroupSelector": selector},
        }
        custom.create_cluster_custom_object("karpenter.k8s.aws", "v1alpha1", "awsnodetemplates", template)

        # The v1 CRDs appear: karpy starts watching NodeClaims and a NodePool's pod gets one.
        applied = {f.stem for f in crd_files("v1alpha5")}
        for path in crd_files("all"):
            if path.stem not in applied:
                karpyenv.install_crd(api, path)
        custom.delete_cluster_custom_object("karpenter.sh", "v1alpha5", "provisioners", "default")
        for body in nodepool(state["cluster_name"], 30):
            group, version = body["apiVersion"].split("/")
            plural = "nodepools" if body["kind"] == "NodePool" else "ec2nodeclasses"
            custom.create_cluster_custom_object(group, version, plural, body)
        _wait(
            lambda: (
                "Watching nodeclaims, nodeclaims.karpenter.sh/v1 is now served" in controller_log.read_text()
            ),
            60,
            "the nodeclaims watch",
        )
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "after-nodeclaims", "namespace": "default"},
            "spec": {
                "terminationGracePeriodSeconds": 0,
                "nodeSelector": {"karpenter.sh/nodepool": "default"},
                "containers": [{"name": "pause", "image": "pause", "resources": {"requests": {"cpu": "1"}}}],
            },
        }
        client.CoreV1Api(api).create_namespaced_pod("default", pod)
        claims = _wait(
            lambda: custom.list_cluster_custom_object("karpenter.sh", "v1", "nodeclaims")["items"],
            120,
            "a NodeClaim",
        )
        assert claims[0]["metadata"]["labels"]["karpenter.sh/nodepool"] == "default"
        _wait(
            lambda: client.CoreV1Api(api).read_namespaced_pod("after-nodeclaims", "default").spec.node_name,
            120,
            "the pod to be bound",
        )
        assert _warnings(controller_log) == []
    finally:
        down = subprocess.run([*demo, "down"], cwd=ROOT, capture_output=True, text=True, timeout=180)
        assert down.returncode == 0, down.stdout + down.stderr
    # --keep left everything running for the steps above; `down` stopped all of it.
    assert_nothing_left(summary, run_dir)


@pytest.fixture(scope="module")
def fresh_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    folder = tmp_path_factory.mktemp("helm-cluster")
    state = localcluster.up(folder, die_with_parent=True, quiet=True)
    try:
        yield state
    finally:
        localcluster.down(folder, quiet=True)


@pytest.mark.slow
def test_helm_install_with_the_image_reference(
    fresh_cluster: dict[str, Any], image: karpy_image.Image
) -> None:
    from kubernetes import client

    from hack import helm as helm_build

    repository, tag = image.ref.rsplit(":", 1)
    helm = [str(helm_build.binary()), "--kubeconfig", fresh_cluster["kubeconfig"]]
    values = [
        "--set",
        "clusterName=karpy",
        "--set",
        f"image.repository={repository}",
        "--set",
        f"image.tag={tag}",
    ]
    install = subprocess.run(
        [*helm, "install", "karpy", str(CHART), "--namespace", "karpy", "--create-namespace", *values],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    api = karpyenv.api_client(fresh_cluster)

    # Every object helm created exists on the API server, as rendered (kind, namespace, name).
    manifest = subprocess.run(
        [*helm, "get", "manifest", "karpy", "--namespace", "karpy"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    objects = [d for d in yaml.safe_load_all(manifest) if d]
    assert len(objects) > 10
    for obj in objects:
        namespace = obj["metadata"].get("namespace") or ("karpy" if _namespaced(api, obj) else None)
        path = _object_path(api, obj, namespace)
        status, _ = _get(api, path)
        assert status == 200, f"{obj['kind']} {obj['metadata']['name']} missing ({path})"

    # The chart's CRDs (crds/): installed and Established, the same files the demo applies.
    extensions = client.ApiextensionsV1Api(api)
    for path in crd_files("all"):
        crd = extensions.read_custom_resource_definition(path.stem)
        assert any(c.type == "Established" and c.status == "True" for c in crd.status.conditions or [])
    assert set(V1ALPHA5_CRDS) < {p.stem for p in crd_files("all")}

    admission = client.AdmissionregistrationV1Api(api)
    assert admission.read_mutating_webhook_configuration("karpy-webhook").webhooks
    assert admission.read_validating_webhook_configuration("karpy-webhook").webhooks

    # `karpy status` without flags asks the chart's Service through the API server's proxy: here it
    # exists with no ready pod (kwok runs no containers), so the API server answers 503.
    env = {
        **os.environ,
        "KARPY_NAMESPACE": "karpy",
        "KARPY_EXTENDER_METRICS_BIND": f"127.0.0.1:{procs.free_port()}",
    }
    env.pop("KARPY_STATUS_METRICS_URL", None)
    status = subprocess.run(
        [str(Path(sys.executable).with_name("karpy")), "status", "--kubeconfig", fresh_cluster["kubeconfig"]],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert status.returncode == 0, status.stderr
    assert "no controller metrics: service karpy/karpy-controller port metrics (503)" in status.stdout

    # kube-controller-manager creates the Deployments' pods with the image reference.
    core = client.CoreV1Api(api)
    for app in ("karpy-controller", "karpy-webhook"):
        pods = _wait(
            lambda app=app: (
                core.list_namespaced_pod("karpy", label_selector=f"app.kubernetes.io/name={app}").items
            ),
            60,
            f"{app} pods",
        )
        assert {c.image for p in pods for c in p.spec.containers} == {image.ref}


def _namespaced(api: Any, obj: dict[str, Any]) -> bool:
    return bool(_resource(api, obj)["namespaced"])


def _resource(api: Any, obj: dict[str, Any]) -> dict[str, Any]:
    group_version = obj["apiVersion"]
    base = f"/api/{group_version}" if "/" not in group_version else f"/apis/{group_version}"
    status, body = _get(api, base)
    assert status == 200, f"{base}: {status}"
    resources = json.loads(body)["resources"]
    return next(r for r in resources if r["kind"] == obj["kind"] and "/" not in r["name"]) | {"base": base}


def _object_path(api: Any, obj: dict[str, Any], namespace: str | None) -> str:
    resource = _resource(api, obj)
    scope = f"/namespaces/{namespace}" if resource["namespaced"] else ""
    return f"{resource['base']}{scope}/{resource['name']}/{obj['metadata']['name']}"


def _get(api: Any, path: str) -> tuple[int, bytes]:
    """GET any API path as the cluster admin: (HTTP status, body)."""
    from kubernetes.client.exceptions import ApiException

    try:
        response = api.call_api(path, "GET", auth_settings=["BearerToken"], _preload_content=False)
    except ApiException as err:
        return int(err.status), b""
    response = response[0] if isinstance(response, tuple) else response
    return int(response.status), bytes(response.data)
