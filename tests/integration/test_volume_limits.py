"""Issue 24's CSI attach-limit proof on the local control plane + moto: 30 pods each with one CSI
volume, on karpy nodes whose CSINode allows 8 volumes of the driver, are never packed more than 8 to
such a node. Asserted on what the API server shows: each pod's node and each node's CSINode.

kwok plays the kubelets and runs no CSI node plugin, so the test publishes the CSINodes the EBS CSI
driver would (`spec.drivers[].allocatable.count`): 8 on the nodes that exist before the volume pods,
and, on any node karpy launches for them, the limit karpy assumed for its type
(`extender/scheduling/attach.py`). The volumes are statically provisioned CSI PersistentVolumes of
`ebs.csi.aws.com`, pre-bound to their claims, which the PV controller binds before the pods exist; the
pods are then karpy's to bind (nothing is left to kube-scheduler's VolumeBinding).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from extender.api import labels as wk
from extender.scheduling import attach
from tests.integration.helpers import Karpy, create_pods, pod_manifest, provisioner, unique, wait_for

pytestmark = pytest.mark.integration

TYPE = "m5.2xlarge"  # 8 vCPU, 58 pods: room decides nothing, the volumes do
LIMIT = 8
PODS = 30
SEEDS = 2
#: Launch on moto, Node create, bind.
LAUNCH_SECONDS = 60


def csinode(name: str, count: int) -> dict[str, Any]:
    """The CSINode the EBS CSI node plugin publishes for node `name` (kubelet registers it)."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": name},
        "spec": {
            "drivers": [
                {
                    "name": attach.EBS_CSI_DRIVER,
                    "nodeID": name,
                    "allocatable": {"count": count},
                    "topologyKeys": [],
                }
            ]
        },
    }


def karpy_nodes(core: Any, provisioner_name: str) -> list[str]:
    return sorted(
        n.metadata.name
        for n in core.list_node(label_selector=f"{wk.PROVISIONER_NAME}={provisioner_name}").items
    )


@pytest.fixture
def volumes(core_v1: Any, namespace: str) -> Iterator[list[str]]:
    """PODS claims, each pre-bound to its own statically provisioned EBS CSI volume, Bound."""
    names = [f"vol-{i}" for i in range(PODS)]
    volume_names = [f"{namespace}-{n}" for n in names]
    for name, pv in zip(names, volume_names, strict=True):
        core_v1.create_persistent_volume(
            {
                "metadata": {"name": pv},
                "spec": {
                    "capacity": {"storage": "1Gi"},
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": "",
                    "claimRef": {"namespace": namespace, "name": name},
                    "csi": {"driver": attach.EBS_CSI_DRIVER, "volumeHandle": f"vol-{pv}"},
                },
            }
        )
        core_v1.create_namespaced_persistent_volume_claim(
            namespace,
            {
                "metadata": {"name": name},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": "",
                    "volumeName": pv,
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            },
        )

    def bound() -> bool:
        claims = core_v1.list_namespaced_persistent_volume_claim(namespace).items
        return len(claims) == PODS and all(c.status.phase == "Bound" for c in claims)

    try:
        wait_for(bound, 60, f"{PODS} claims Bound by the PV controller")
        yield names
    finally:
        for pv in volume_names:
            core_v1.delete_persistent_volume(pv)


def test_no_node_holds_more_volume_pods_than_its_csinode_allows(
    karpy: Karpy, core_v1: Any, namespace: str, volumes: list[str]
) -> None:
    from kubernetes import client

    storage = client.StorageV1Api(karpy.kube)
    started = time.monotonic()
    name = unique("attach")
    provisioner(karpy.kube, name, [{"key": wk.INSTANCE_TYPE, "operator": "In", "values": [TYPE]}])
    selector = {wk.PROVISIONER_NAME: name}
    published: list[str] = []
    try:
        # Two karpy nodes first (one 5-CPU pod each), whose CSINodes allow 8 EBS volumes.
        create_pods(
            core_v1, namespace, [pod_manifest(f"seed-{i}", "5", selector=selector) for i in range(SEEDS)]
        )
        seeds = wait_for(
            lambda: len(nodes := karpy_nodes(core_v1, name)) == SEEDS and nodes,
            LAUNCH_SECONDS,
            "2 seed nodes",
        )
        for node in seeds:
            storage.create_csi_node(csinode(node, LIMIT))
            published.append(node)
        # 30 pods of one volume each; by cpu and pods they would all fit on one seed node.
        manifests = []
        for i, claim in enumerate(volumes):
            manifest = pod_manifest(f"vol-{i}", "100m", selector=selector)
            manifest["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
            manifests.append(manifest)
        create_pods(core_v1, namespace, manifests, parallel=4)

        limits: dict[str, int] = {node: LIMIT for node in seeds}

        def publish_new_nodes() -> None:
            """A node karpy launched for the volume pods gets the CSINode karpy assumed for its type."""
            for node in karpy_nodes(core_v1, name):
                if node not in limits:
                    raw = karpy.ec2.describe_instance_types(InstanceTypes=[TYPE])["InstanceTypes"][0]
                    limits[node] = attach.ebs_limit(raw)
                    storage.create_csi_node(csinode(node, limits[node]))
                    published.append(node)

        def all_bound() -> list[Any]:
            publish_new_nodes()
            pods = [
                p for p in core_v1.list_namespaced_pod(namespace).items if p.metadata.name.startswith("vol-")
            ]
            return pods if len(pods) == PODS and all(p.spec.node_name for p in pods) else []

        pods = wait_for(all_bound, LAUNCH_SECONDS, f"{PODS} volume pods bound")
        publish_new_nodes()
        per_node = Counter(p.spec.node_name for p in pods)
        # What the API server shows: each node's volume pods against its CSINode's count.
        for node, count in per_node.items():
            (driver,) = storage.read_csi_node(node).spec.drivers
            assert driver.name == attach.EBS_CSI_DRIVER
            assert count <= driver.allocatable.count, (
                f"{node}: {count} volume pods > CSINode {driver.allocatable.count}"
            )
        # karpy filled the CSINode-limited nodes to their limit, not past it, and launched for the rest.
        assert [per_node[node] for node in seeds] == [LIMIT] * SEEDS
        assert sum(per_node.values()) == PODS and len(per_node) > SEEDS
        print(
            f"\nvolume pods per node: {dict(sorted(per_node.items()))}; CSINode counts: {limits}; "
            f"max on a CSINode-8 node: {max(per_node[n] for n in seeds)}; {time.monotonic() - started:.1f}s"
        )
    finally:
        for node in published:
            storage.delete_csi_node(node)
