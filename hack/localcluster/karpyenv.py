"""How a `karpy controller` process is configured for a local cluster (its state.json): shared by the
integration tests and the benchmarks that start the real entry point, so neither imports the other."""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hack.localcluster import awsseed

#: The Provisioner CRD karpy serves (karpenter.sh/v1alpha5).
PROVISIONER_CRD = Path(__file__).resolve().parents[2] / "manifests" / "crd" / "provisioners.karpenter.sh.yaml"
NODE_TEMPLATE_CRD = PROVISIONER_CRD.with_name("awsnodetemplates.karpenter.k8s.aws.yaml")
#: karpenter.sh/v1 NodePool and karpenter.k8s.aws/v1 EC2NodeClass.
V1_CRDS = (
    PROVISIONER_CRD.with_name("ec2nodeclasses.karpenter.k8s.aws.yaml"),
    PROVISIONER_CRD.with_name("nodepools.karpenter.sh.yaml"),
    PROVISIONER_CRD.with_name("nodeoverlays.karpenter.sh.yaml"),
)
#: karpenter.sh/v1 NodeClaim: the record karpy keeps of each node launched for a NodePool.
NODECLAIM_CRD = PROVISIONER_CRD.with_name("nodeclaims.karpenter.sh.yaml")
#: The built-in on-demand table shipped in the package (what karpy uses without the Pricing API).
PRICES = Path(__file__).resolve().parents[2] / "extender" / "data" / "ec2-on-demand-prices.json"


def node_config_env(state: Mapping[str, Any]) -> dict[str, str]:
    """What nodes need to join this cluster: the CA they trust, the service CIDR and DNS IP
    (AL2023's NodeConfig carries all three), and where the seeded AMI parameters live."""
    ca = Path(state["ca_cert"]).read_bytes() if state.get("ca_cert") else b""
    return {
        "KARPY_CLUSTER_CA_BUNDLE": base64.b64encode(ca).decode(),
        "KARPY_CLUSTER_CIDR": awsseed.SERVICE_CIDR,
        "KARPY_CLUSTER_DNS": awsseed.CLUSTER_DNS,
        "KARPY_AWS_SSM_ROOT": state["aws"]["ssm_root"],
    }


def controller_env(state: dict[str, Any], bind: str) -> dict[str, str]:
    """The environment of a `karpy controller` for the local cluster described by state.json."""
    seed = state["aws"]
    env = {
        **os.environ,
        # moto accepts any key; boto3 must find one, and never a real one.
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "KARPY_KUBECONFIG": state["kubeconfig"],
        "KARPY_CLUSTER_NAME": state.get("cluster_name", seed["cluster_name"]),
        "KARPY_CLUSTER_ENDPOINT": state["apiserver_url"],
        "KARPY_AWS_REGION": seed["region"],
        "KARPY_AWS_ENDPOINT_URL": seed["endpoint_url"],
        **node_config_env(state),
        "KARPY_AWS_PRICING_API": "false",
        "KARPY_AWS_PRICE_FILE": str(PRICES),
        "KARPY_AWS_DEFAULT_INSTANCE_PROFILE": "karpy-node",
        "KARPY_EXTENDER_BIND": bind,
        "KARPY_EXTENDER_METRICS_BIND": bind,
        "KARPY_LEADER_ELECTION_ENABLED": "false",
    }
    if tls := state.get("extender_tls"):
        env["KARPY_EXTENDER_TLS_CERT_FILE"], env["KARPY_EXTENDER_TLS_KEY_FILE"] = tls["cert"], tls["key"]
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
        env.pop(name, None)
    return env


@contextmanager
def running_controller(
    env: Mapping[str, str], ready_url: str, log_path: Path, *, ready_seconds: float = 60.0, verify: Any = True
) -> Iterator[subprocess.Popen[bytes]]:
    """`karpy controller` (the real entry point, this interpreter's) with `env`, logging to
    `log_path`, once `ready_url` (its /readyz) answers 200; stopped with SIGTERM on exit (killed
    after 20 s), so the caller can read `returncode` after the block. Raises RuntimeError with the
    log's tail when it exits or is not ready within `ready_seconds`."""
    import requests

    with log_path.open("wb") as log_file:
        process = subprocess.Popen(
            [str(Path(sys.executable).with_name("karpy")), "controller"],
            env=dict(env),
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + ready_seconds
        while True:
            try:
                if requests.get(ready_url, timeout=1, verify=verify).status_code == 200:
                    break
            except requests.RequestException:  # refused or unanswered while the worker boots
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                tail = log_path.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"karpy controller did not become ready ({ready_url}):\n{tail}")
            time.sleep(0.2)
        yield process
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def api_client(state: Mapping[str, Any], *, pool: int | None = None) -> Any:
    """A kubernetes ApiClient as the cluster's admin (its kubeconfig in state.json); `pool`: the
    connection pool size, for callers that run many requests at once."""
    from kubernetes import client, config

    configuration = client.Configuration()
    config.load_kube_config(config_file=state["kubeconfig"], client_configuration=configuration)
    if pool is not None:
        configuration.connection_pool_maxsize = pool
    return client.ApiClient(configuration)


def create_provisioner(api: Any, name: str, spec: Mapping[str, Any] | None = None) -> None:
    """A karpenter.sh/v1alpha5 Provisioner `name` with `spec` (empty: no constraints)."""
    from kubernetes import client

    body = {
        "apiVersion": "karpenter.sh/v1alpha5",
        "kind": "Provisioner",
        "metadata": {"name": name},
        "spec": dict(spec or {}),
    }
    custom = client.CustomObjectsApi(api)
    custom.create_cluster_custom_object("karpenter.sh", "v1alpha5", "provisioners", body)


def install_provisioner_crd(api: Any) -> str:
    """Create (or replace older revisions of) the Provisioner CRD, the AWSNodeTemplate CRD its
    providerRef names, the v1 NodePool, EC2NodeClass and NodeClaim CRDs, and wait until they are
    Established (at most 30 s each); returns the Provisioner CRD's name."""
    install_crd(api, NODE_TEMPLATE_CRD)
    install_crd(api, NODECLAIM_CRD)
    name = install_crd(api, PROVISIONER_CRD)
    # Both API versions in one cluster, as the chart installs them.
    for path in V1_CRDS:
        install_crd(api, path)
    return name


def install_crd(api: Any, path: Path) -> str:
    """Create (or replace an older revision of) the CRD in `path` and wait until it is Established."""
    import yaml
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    body = yaml.safe_load(path.read_text())
    name = body["metadata"]["name"]
    ext = client.ApiextensionsV1Api(api)
    try:
        ext.create_custom_resource_definition(body)
    except ApiException as err:
        if err.status != 409:
            raise
        # A reused cluster may hold an older revision of the CRD: replace it.
        current = ext.read_custom_resource_definition(name)
        body["metadata"]["resourceVersion"] = current.metadata.resource_version
        ext.replace_custom_resource_definition(name, body)
    deadline = time.monotonic() + 30
    while True:
        conditions = ext.read_custom_resource_definition(name).status.conditions or []
        if any(c.type == "Established" and c.status == "True" for c in conditions):
            return name
        if time.monotonic() > deadline:
            raise RuntimeError(f"CRD {name} not Established after 30s")
        time.sleep(0.2)
