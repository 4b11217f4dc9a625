"""`karpy status` against the local control plane's API server reads Provisioners and NodePools
as the controller loads them (extender/api through `load_configured`, EC2NodeClasses resolving
nodeClassRef), not as raw manifests: a NodePool whose EC2NodeClass is missing is listed as invalid
with the loader's reason, the others with the fields the model gives them."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from extender.cli.main import main
from hack.localcluster.karpyenv import V1_CRDS, install_crd
from tests.builders import nodepool_manifest
from tests.unit.api.test_nodepool import node_class
from tests.unit.webhook.reviews import provisioner_manifest

pytestmark = pytest.mark.integration

RUN = uuid.uuid4().hex[:6]


def named(obj: dict[str, Any], name: str) -> dict[str, Any]:
    return {**obj, "metadata": {"name": name}}


def pool_of(class_name: str, **spec: Any) -> dict[str, Any]:
    ref = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": class_name}
    return nodepool_manifest(
        template_spec={"requirements": spec.pop("requirements", []), "nodeClassRef": ref}, **spec
    )


SPOT = {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}
WHEN_EMPTY = {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "1m30s"}
#: (group, version, plural, manifest)
OBJECTS = [
    ("karpenter.k8s.aws", "v1", "ec2nodeclasses", named(node_class(), f"class-{RUN}")),
    (
        "karpenter.sh",
        "v1",
        "nodepools",
        named(pool_of(f"class-{RUN}", requirements=[SPOT], weight=7, disruption=WHEN_EMPTY), f"pool-{RUN}"),
    ),
    ("karpenter.sh", "v1", "nodepools", named(pool_of("gone"), f"orphan-{RUN}")),
    (
        "karpenter.sh",
        "v1alpha5",
        "provisioners",
        named(provisioner_manifest(ttlSecondsAfterEmpty=30), f"prov-{RUN}"),
    ),
]


@pytest.fixture(scope="module")
def applied(cluster: Any, provisioner_crd: str) -> Iterator[str]:
    """The objects created on the API server; the kubeconfig `karpy status` reads it with."""
    from kubernetes import client

    with cluster.api_client() as api:
        for path in V1_CRDS:
            install_crd(api, path)
        custom = client.CustomObjectsApi(api)
        for group, version, plural, obj in OBJECTS:
            custom.create_cluster_custom_object(group, version, plural, obj)
        try:
            yield cluster.state["kubeconfig"]
        finally:
            for group, version, plural, obj in OBJECTS:
                custom.delete_cluster_custom_object(group, version, plural, obj["metadata"]["name"])


def test_status_lists_the_pools_as_the_controller_loads_them(
    applied: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # No controller: metrics discovery gives up on the chart's Service and an unused local port.
    monkeypatch.setenv("KARPY_EXTENDER_METRICS_BIND", "127.0.0.1:1")
    assert main(["status", "--kubeconfig", applied, "-o", "json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)["provisioners"]}
    pool, orphan, prov = rows[f"pool-{RUN}"], rows[f"orphan-{RUN}"], rows[f"prov-{RUN}"]
    assert (pool["weight"], pool["ttl_seconds_after_empty"], pool["capacity_types"], pool["problem"]) == (
        7,
        90,
        ["spot"],
        "",
    )
    # karpy plan's defaults (Karpenter 0.5's): no capacity-type requirement means on-demand.
    assert (prov["ttl_seconds_after_empty"], prov["capacity_types"], prov["problem"]) == (
        30,
        ["on-demand"],
        "",
    )
    assert orphan["problem"] == 'spec.template.spec.nodeClassRef.name: EC2NodeClass "gone" not found'
