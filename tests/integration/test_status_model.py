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

pytestmark = pytest.mark.integration

RUN = uuid.uuid4().hex[:6]
CLASS_REF = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass"}
#: (group, version, plural, manifest)
OBJECTS = [
    (
        "karpenter.k8s.aws",
        "v1",
        "ec2nodeclasses",
        {
            "apiVersion": "karpenter.k8s.aws/v1",
            "kind": "EC2NodeClass",
            "metadata": {"name": f"class-{RUN}"},
            "spec": {
                "role": "KarpenterNodeRole",
                "amiSelectorTerms": [{"alias": "al2023@latest"}],
                "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
                "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
            },
        },
    ),
    (
        "karpenter.sh",
        "v1",
        "nodepools",
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": f"pool-{RUN}"},
            "spec": {
                "weight": 7,
                "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "1m30s"},
                "template": {
                    "spec": {
                        "requirements": [
                            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}
                        ],
                        "nodeClassRef": {**CLASS_REF, "name": f"class-{RUN}"},
                    }
                },
            },
        },
    ),
    (
        "karpenter.sh",
        "v1",
        "nodepools",
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": f"orphan-{RUN}"},
            "spec": {
                "template": {"spec": {"requirements": [], "nodeClassRef": {**CLASS_REF, "name": "gone"}}}
            },
        },
    ),
    (
        "karpenter.sh",
        "v1alpha5",
        "provisioners",
        {
            "apiVersion": "karpenter.sh/v1alpha5",
            "kind": "Provisioner",
            "metadata": {"name": f"prov-{RUN}"},
            "spec": {"ttlSecondsAfterEmpty": 30},
        },
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
