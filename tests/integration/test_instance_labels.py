"""Issue 25's instance-type labels on the local control plane + moto: a Provisioner selecting by
`karpenter.k8s.aws/instance-category` and `instance-generation` launches only such types (moto's
full catalog offers r3 to r8), and the Node objects the API server holds carry the labels."""

from __future__ import annotations

from typing import Any

import pytest

from extender.api import labels as wk
from extender.api.nodeclass import AMI_ID_ANNOTATION
from tests.integration.helpers import (
    Karpy,
    all_bound,
    create_pods,
    node_of,
    pod_manifest,
    provisioner,
    unique,
    wait_for,
)

pytestmark = pytest.mark.integration


def test_category_r_generation_gt_5_launches_only_such_types_and_nodes_carry_the_labels(
    karpy: Karpy, core_v1: Any, namespace: str
) -> None:
    name = unique("rgen")
    provisioner(
        karpy.kube,
        name,
        [
            {"key": wk.INSTANCE_CATEGORY, "operator": "In", "values": ["r"]},
            {"key": wk.INSTANCE_GENERATION, "operator": "Gt", "values": ["5"]},
            {"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
        ],
        provider={"instanceProfile": "karpy-node"},
    )
    # Memory-heavy pods: r types are what a cost-aware plan would pick anyway, among all generations.
    manifests = []
    for i in range(4):
        manifest = pod_manifest(f"mem-{i}", "1", "24Gi", selector={wk.PROVISIONER_NAME: name})
        manifests.append(manifest)
    create_pods(core_v1, namespace, manifests)
    pods = wait_for(all_bound(core_v1, namespace, 4, running=True), 120, "4 pods Running")
    catalog = {t.name: t for t in karpy.cloud.get_instance_types()}
    for node_name in {p.spec.node_name for p in pods}:
        node = node_of(core_v1, node_name)
        labels = node.metadata.labels
        itype = labels[wk.INSTANCE_TYPE]
        expected = dict(catalog[itype].type_labels)
        assert labels[wk.INSTANCE_CATEGORY] == "r" and int(labels[wk.INSTANCE_GENERATION]) > 5, itype
        assert itype.startswith(("r6", "r7", "r8")), itype
        # Every label the type has, as the API server shows it.
        assert {k: labels.get(k) for k in expected} == expected
        assert labels[wk.INSTANCE_FAMILY] == itype.split(".")[0]
        assert labels[wk.INSTANCE_SIZE] == itype.split(".")[1]
        assert labels[wk.INSTANCE_CPU] == str(int(catalog[itype].cpu))
        # The AMI the instance booted from is recorded (AMI drift compares it).
        assert node.metadata.annotations[AMI_ID_ANNOTATION].startswith("ami-")
        print(f"\n{node_name}: {itype} " + " ".join(f"{k}={v}" for k, v in sorted(expected.items())))
