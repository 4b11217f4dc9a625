"""kube-scheduler calls karpy's extender over HTTPS (issue 13, "optionally TLS for the extender").

A local control plane of its own, started with `extender_tls`: kube-scheduler's config has
`enableHTTPS: true` and `tlsConfig.caFile` (the cluster CA); the real `karpy controller` serves the
extender with a certificate that CA issued (KARPY_EXTENDER_TLS_CERT_FILE/KEY_FILE) and /metrics on a
plain port. The extender is `ignorable`, so a pod getting scheduled proves nothing by itself: the
proof is the extender's own count of /filter requests, which only a completed handshake can move.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from hack.localcluster import cluster as localcluster
from hack.localcluster.karpyenv import api_client, install_provisioner_crd, running_controller
from tests.integration.helpers import controller_env, free_port, guarded, wait_for

pytestmark = pytest.mark.integration

FILTER_COUNT = re.compile(r'^karpy_extender_request_duration_seconds_count\{verb="filter"\} (\S+)$', re.M)


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    folder = tmp_path_factory.mktemp("tls-cluster")
    state = localcluster.up(folder, die_with_parent=True, quiet=True, extender_tls=True)
    try:
        yield state
    finally:
        localcluster.down(folder, quiet=True)


def _api(state: dict[str, Any]) -> Any:
    return api_client(state)


@pytest.fixture(scope="module")
def controller(tls_cluster: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """`karpy controller` on the port kube-scheduler calls; yields the plain metrics port."""
    with _api(tls_cluster) as api:
        install_provisioner_crd(api)
    metrics_port = free_port()
    env = {
        **controller_env(tls_cluster, f"127.0.0.1:{tls_cluster['extender_port']}"),
        "KARPY_EXTENDER_METRICS_BIND": f"127.0.0.1:{metrics_port}",
    }
    log_path = tmp_path_factory.mktemp("tls-controller") / "controller.log"
    ready = f"{tls_cluster['extender_url']}readyz"
    with running_controller(env, ready, log_path, ready_seconds=30, verify=tls_cluster["extender_tls"]["ca"]):
        yield metrics_port


def _filter_calls(metrics_port: int) -> float:
    text = requests.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).text
    found = FILTER_COUNT.search(text)
    return float(found.group(1)) if found else 0.0


def test_kube_scheduler_calls_the_extender_over_https(tls_cluster: dict[str, Any], controller: int) -> None:
    from kubernetes import client

    assert tls_cluster["extender_url"].startswith("https://")
    with pytest.raises(requests.RequestException):
        requests.get(f"http://127.0.0.1:{tls_cluster['extender_port']}/healthz", timeout=5)
    before = _filter_calls(controller)
    with _api(tls_cluster) as api:
        core = client.CoreV1Api(api)
        node = "kwok-tls"
        labels = {"karpy.sh/managed": "true", "kubernetes.io/hostname": node}
        core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name=node, labels=labels)))
        wait_for(lambda: _ready(core.read_node(node)), 60, f"kwok to make node {node} Ready")
        wait_for(lambda: _default_service_account(core), 30, "the default ServiceAccount")
        # Requesting karpy.sh/guarded: the shipped config sends kube-scheduler's filter for it.
        core.create_namespaced_pod(
            "default",
            guarded(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": "via-scheduler"},
                    "spec": {
                        "nodeSelector": {"kubernetes.io/hostname": node},
                        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}],
                    },
                }
            ),
        )
        wait_for(
            lambda: core.read_namespaced_pod("via-scheduler", "default").spec.node_name == node,
            60,
            "kube-scheduler to bind the pod",
        )
    # The count is observed before the answer goes out, so it has moved by the time the pod is bound.
    assert _filter_calls(controller) > before, "kube-scheduler never completed a /filter call over TLS"


def _ready(node: Any) -> bool:
    conditions = node.status.conditions or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions) and not any(
        t.key == "node.kubernetes.io/not-ready" for t in node.spec.taints or []
    )


def _default_service_account(core: Any) -> bool:
    from kubernetes.client.exceptions import ApiException

    try:
        core.read_namespaced_service_account("default", "default")
        return True
    except ApiException:
        time.sleep(0.2)
        return False
