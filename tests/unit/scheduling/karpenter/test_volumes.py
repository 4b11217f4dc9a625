"""Karpenter suite_test.go Describe("VolumeUsage") on karpy's solve().

Claims reach solve() through `Pod.from_manifest(manifest, Volumes.topology(manifest))`, as the controller
parses pending pods (extender/cluster/volumes.py). Karpenter's fake CSI driver is "fake.csi.provider".
"""

from __future__ import annotations

from typing import Any

import pytest

from extender.api.pod import Pod
from extender.cluster.volumes import Volumes
from tests.builders import ZONE, pod, provisioner, req, term
from tests.unit.scheduling.builders import catalog
from tests.unit.scheduling.karpenter.builders import (
    ARCH,
    HOSTNAME,
    Z1,
    Z2,
    Cluster,
    claim,
    not_ported,
    storage_class,
    zonal_volume,
)


def cluster() -> Cluster:
    return Cluster(provisioner())


_CSI = "fake.csi.provider"


def _claims_volumes(count: int, per_pod: int, **class_options: Any) -> tuple[Volumes, list[list[str]]]:
    """`count` pods' worth of distinct claims (`per_pod` each) on a WaitForFirstConsumer class of the
    fake CSI driver."""
    names = [[f"claim-{i}-{j}" for j in range(per_pod)] for i in range(count)]
    volumes = Volumes(
        claims={f"default/{n}": claim(n, storageClassName="csi") for row in names for n in row},
        classes={"csi": storage_class("csi", **class_options)},
    )
    return volumes, names


def test_launches_multiple_nodes_if_required_due_to_volume_limits():
    """Karpenter suite_test.go: VolumeUsage "should launch multiple nodes if required due to volume
    limits": an in-flight node whose CSINode allows 10 volumes of the driver takes 5 pods of 2 claims
    each; the sixth needs a second node (kube-scheduler NodeVolumeLimits)."""
    c = cluster()
    first = pod()
    c.provision([first])
    node = c.expect_scheduled(first)
    c.replace_node(node.name, volume_limits=((_CSI, 10),))
    volumes, names = _claims_volumes(6, 2)
    batch = [pod(claims=row, cluster_volumes=volumes) for row in names]
    c.provision(batch)
    assert len(c.nodes) == 2
    assert sum(1 for p in batch if c.expect_scheduled(p).name == node.name) == 5
    for n in c.nodes:
        assert n.volume_room(_CSI) >= 0, n.name


def test_a_new_node_takes_no_more_ebs_volumes_than_its_type_attaches():
    """New nodes: the EBS CSI driver's attach limit of the type (extender/scheduling/attach.py), which
    a planned node never exceeds, whatever room cpu and memory leave."""
    from extender.scheduling import attach

    volumes, names = _claims_volumes(60, 1, provisioner_name=attach.EBS_CSI_DRIVER)
    batch = [pod(claims=row, cluster_volumes=volumes, cpu="10m") for row in names]
    c = cluster()
    plan = c.provision(batch)
    assert not plan.unschedulable and len(plan.nodes) >= 3
    for planned in plan.nodes:
        assert all(
            0 < len(planned.pods) <= (t.volume_limit(attach.EBS_CSI_DRIVER) or 0) for t in planned.options
        )


def _big_node_cluster() -> Cluster:
    """Karpenter's VolumeUsage BeforeEach gives its one instance type 1024 cpu and 1024 pods: here the
    fixture catalog's m5.16xlarge (737 pods), so room never decides before the volumes do."""
    return Cluster(provisioner(), instance_types=[t for t in catalog() if t.name == "m5.16xlarge"])


def test_launches_a_single_node_if_all_pods_use_the_same_pvc():
    """Karpenter suite_test.go: VolumeUsage "should launch a single node if all pods use the same PVC":
    100 pods of one claim all go onto the in-flight node whose CSINode allows 10 volumes.

    Karpenter's PersistentVolume carries its fake `test.driver`, which the CSINode does not limit; here it
    is the limited driver, so the test proves what its title says: kube-scheduler's NodeVolumeLimits
    counts a claim once per node (`nodevolumelimits/csi.go` keys volumes by driver and handle)."""
    c = _big_node_cluster()
    first = pod(node_selector={ZONE: Z1})
    c.provision([first])
    node = c.expect_scheduled(first)
    c.replace_node(node.name, volume_limits=((_CSI, 10),))
    pv = zonal_volume("my-volume", Z1)
    pv["spec"]["csi"]["driver"] = _CSI
    volumes = Volumes(
        claims={
            "default/my-claim": claim("my-claim", storageClassName="my-storage-class", volumeName="my-volume")
        },
        volumes={"my-volume": pv},
        classes={"my-storage-class": storage_class("my-storage-class", zones=[Z1], binding="Immediate")},
    )
    batch = [pod(claims=["my-claim"], cluster_volumes=volumes) for _ in range(100)]
    c.provision(batch)
    assert len(c.nodes) == 1
    assert all(c.expect_scheduled(p).name == node.name for p in batch)
    assert c.nodes[0].volume_room(_CSI) == 9


def test_new_nodes_count_a_shared_claim_once():
    """kube-scheduler NodeVolumeLimits counts unique volumes per node (`nodevolumelimits/csi.go`): 28 pods
    sharing one EBS claim hold one attachment, so one new node (the cheapest type, 29 pods) takes them all
    although its type attaches 25 volumes (karpy once counted the claim per pod: two nodes)."""
    from extender.scheduling import attach

    volumes = Volumes(
        claims={"default/shared": claim("shared", storageClassName="ebs")},
        classes={"ebs": storage_class("ebs", provisioner_name=attach.EBS_CSI_DRIVER)},
    )
    batch = [pod(claims=["shared"], cluster_volumes=volumes, cpu="10m") for _ in range(28)]
    plan = cluster().provision(batch)
    assert not plan.unschedulable
    assert len(plan.nodes) == 1 and len(plan.nodes[0].pods) == 28


def test_shared_and_own_claims_both_within_the_limit():
    """Pods with a claim of their own each and one claim they all share: a node holds the shared
    volume once plus one per pod, never more than the limit (kube-scheduler NodeVolumeLimits)."""
    c = _big_node_cluster()
    first = pod(node_selector={ZONE: Z1})
    c.provision([first])
    node = c.expect_scheduled(first)
    c.replace_node(node.name, volume_limits=((_CSI, 5),))
    volumes, names = _claims_volumes(12, 1)
    volumes.claims["default/shared"] = claim("shared", storageClassName="csi")
    batch = [pod(claims=[*row, "shared"], cluster_volumes=volumes) for row in names]
    c.provision(batch)
    on_first = [p for p in batch if c.expect_scheduled(p).name == node.name]
    assert len(on_first) == 4  # the shared volume + 4 of their own = the limit of 5
    for n in c.nodes:
        assert n.volume_room(_CSI) >= 0, n.name


def test_a_claim_already_attached_on_a_full_node_takes_no_more_room():
    """A pod whose claim a pod on the node already holds adds no volume there (kube-scheduler
    NodeVolumeLimits counts the node's unique volumes): it joins the node at its limit, in the plan
    and in the check before binding."""
    from extender.scheduling.admission import check

    volumes = Volumes(
        claims={"default/data": claim("data", storageClassName="csi")},
        classes={"csi": storage_class("csi")},
    )
    c = _big_node_cluster()
    holder = pod(claims=["data"], cluster_volumes=volumes)
    c.provision([holder])
    node = c.expect_scheduled(holder)
    c.replace_node(node.name, volume_limits=((_CSI, 1),))
    assert c.nodes[0].volume_room(_CSI) == 0
    joiner = pod(claims=["data"], cluster_volumes=volumes)
    assert check(joiner, c.nodes[0], c.nodes) is None
    c.provision([joiner])
    assert c.expect_scheduled(joiner).name == node.name and len(c.nodes) == 1
    other = pod(claims=["claim-0-0"], cluster_volumes=_claims_volumes(1, 1)[0])
    reason = check(other, c.nodes[0], c.nodes)
    assert reason is not None and "exceed max volume count" in reason


def _ephemeral_node_pair(classes: list[dict[str, Any]], ephemeral_class: str | None, **limits: int) -> None:
    """Karpenter's ephemeral-volume cases: a pod with a generic ephemeral volume (template class
    `ephemeral_class`; its claim <pod>-tmp-ephemeral exists, of that class) lands on a node whose CSINode
    then allows `limits` volumes per driver; a second such pod must get another node."""
    volumes = Volumes(classes={_name_of(sc): sc for sc in classes})
    spec = {} if ephemeral_class is None else {"storageClassName": ephemeral_class}

    def with_claim(name: str) -> Pod:
        volumes.claims[f"default/{name}-tmp-ephemeral"] = claim(f"{name}-tmp-ephemeral", **spec)
        return pod(name, ephemeral=[("tmp-ephemeral", ephemeral_class)], cluster_volumes=volumes)

    c = cluster()
    first = with_claim("initial")
    c.provision([first])
    node = c.expect_scheduled(first)
    c.replace_node(node.name, volume_limits=tuple(sorted(limits.items())))
    second = with_claim("second")
    c.provision([second])
    assert c.expect_scheduled(second).name != node.name


def _name_of(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["name"])


def _default(sc: dict[str, Any], created: str = "2026-01-01T00:00:00Z") -> dict[str, Any]:
    sc["metadata"]["annotations"] = {"storageclass.kubernetes.io/is-default-class": "true"}
    sc["metadata"]["creationTimestamp"] = created
    return sc


def test_ephemeral_volume_using_the_specified_storage_class_name():
    """Karpenter suite_test.go: VolumeUsage "should launch nodes for pods with ephemeral volume using the
    specified storage class name"."""
    _ephemeral_node_pair(
        [
            storage_class("my-storage-class", zones=[Z1]),
            _default(storage_class("default-storage-class", zones=[Z1], provisioner_name="other-provider")),
        ],
        "my-storage-class",
        **{_CSI: 1, "other-provider": 10},
    )


def test_ephemeral_volume_using_a_default_storage_class():
    """Karpenter suite_test.go: VolumeUsage "should launch nodes for pods with ephemeral volume using a
    default storage class"."""
    _ephemeral_node_pair([_default(storage_class("default-storage-class", zones=[Z1]))], None, **{_CSI: 1})


def test_ephemeral_volume_using_the_newest_storage_class():
    """Karpenter suite_test.go: VolumeUsage "should launch nodes for pods with ephemeral volume using the
    newest storage class": of two default classes the newer one is used (Kubernetes GetDefaultClass,
    pkg/volume/util/storageclass.go: newest creationTimestamp, then name)."""
    older = _default(
        storage_class("default-storage-class", zones=[Z1], provisioner_name="other-provider"),
        "2026-01-01T00:00:00Z",
    )
    newer = _default(storage_class("newer-default-storage-class", zones=[Z1]), "2026-01-01T00:00:02Z")
    _ephemeral_node_pair([older, newer], None, **{_CSI: 1, "other-provider": 10})


#: kubernetes.io/aws-ebs, migrated to the EBS CSI driver (k8s.io/csi-translation-lib plugins/aws_ebs.go).
_IN_TREE_EBS = "kubernetes.io/aws-ebs"


def test_csi_migration_non_dynamic_pvc_using_a_migrated_pvc_pv():
    """Karpenter suite_test.go: VolumeUsage, CSIMigration "should launch nodes for pods with non-dynamic
    PVC using a migrated PVC/PV": a claim of an in-tree aws-ebs class counts against the EBS CSI
    driver's CSINode limit."""
    from extender.scheduling import attach

    sc = _default(storage_class("in-tree-storage-class", zones=[Z1], provisioner_name=_IN_TREE_EBS))
    volumes = Volumes(
        claims={f"default/{n}": claim(n, storageClassName=_name_of(sc)) for n in ("pvc-1", "pvc-2")},
        classes={"in-tree-storage-class": sc},
    )
    c = cluster()
    first = pod(claims=["pvc-1"], cluster_volumes=volumes)
    c.provision([first])
    node = c.expect_scheduled(first)
    c.replace_node(node.name, volume_limits=((attach.EBS_CSI_DRIVER, 1),))
    second = pod(claims=["pvc-2"], cluster_volumes=volumes)
    c.provision([second])
    assert c.expect_scheduled(second).name != node.name


def test_csi_migration_ephemeral_volume_using_a_migrated_pvc_pv():
    """Karpenter suite_test.go: VolumeUsage, CSIMigration "should launch nodes for pods with ephemeral
    volume using a migrated PVC/PV"."""
    from extender.scheduling import attach

    sc = _default(storage_class("in-tree-storage-class", zones=[Z1], provisioner_name=_IN_TREE_EBS))
    _ephemeral_node_pair([sc], "in-tree-storage-class", **{attach.EBS_CSI_DRIVER: 1})


def test_an_in_tree_ebs_volume_counts_against_the_ebs_csi_limit():
    """A claim bound to an in-tree `awsElasticBlockStore` PersistentVolume counts as an EBS CSI volume
    (kube-scheduler nodevolumelimits csi.go getCSIDriverInfo translates migratable PVs; Karpenter
    volumeusage.go driverFromVolume), an NFS one against no limit."""
    from extender.scheduling import attach

    pv = zonal_volume("in-tree", Z1)
    pv["spec"].pop("csi")
    pv["spec"]["awsElasticBlockStore"] = {"volumeID": "vol-1"}
    nfs = zonal_volume("nfs", Z1)
    nfs["spec"].pop("csi")
    nfs["spec"]["nfs"] = {"server": "fake.server", "path": "/"}
    volumes = Volumes(
        claims={
            "default/a": claim("a", volumeName="in-tree", storageClassName=""),
            "default/b": claim("b", volumeName="nfs", storageClassName=""),
        },
        volumes={"in-tree": pv, "nfs": nfs},
    )
    p = pod(claims=["a", "b"], cluster_volumes=volumes)
    assert p.csi_claims == ((attach.EBS_CSI_DRIVER, "a"),)


def test_does_not_fail_for_nfs_volumes():
    """Karpenter suite_test.go: VolumeUsage "should not fail for NFS volumes"."""
    pv = zonal_volume("my-volume", Z1)
    pv["spec"].pop("csi")
    pv["spec"]["nfs"] = {"server": "fake.server", "path": "/some/path"}
    pv["spec"]["storageClassName"] = "nfs"
    volumes = Volumes(
        claims={"default/my-claim": claim("my-claim", volumeName="my-volume", storageClassName="")},
        volumes={"my-volume": pv},
    )
    c = cluster()
    batch = [pod(claims=["my-claim", "my-claim"], cluster_volumes=volumes) for _ in range(5)]
    c.provision(batch)
    nodes = {c.expect_scheduled(p).name for p in batch}
    assert len(nodes) == 1
    assert all(c.expect_scheduled(p).labels[ZONE] == Z1 for p in batch)


def _expect_apart_in_zone_1_or_2(volumes: Volumes, app: dict[str, str], pod_prefix: str) -> None:
    """Two pods labelled `app`, each with claim multi-zone-pvc-0/1 of `volumes` and zonal anti-affinity to
    `app`: both are scheduled, to different zones among zone-1 and zone-2."""
    c = cluster()
    batch = [
        pod(
            f"{pod_prefix}-{i}",
            labels=app,
            claims=[f"multi-zone-pvc-{i}"],
            pod_anti_requirements=[term(ZONE, app)],
            cluster_volumes=volumes,
        )
        for i in range(2)
    ]
    c.provision(batch)
    zones = [c.expect_scheduled(p).labels[ZONE] for p in batch]
    assert set(zones) <= {Z1, Z2}
    assert zones[0] != zones[1]


def test_schedules_pods_using_a_pv_with_multiple_zones():
    """Karpenter suite_test.go: VolumeUsage "should schedule pods using a PV with multiple zones"."""
    terms = [[req(ZONE, "In", Z1)], [req(ZONE, "In", Z2)]]
    app = {"app": "multi-zone-app"}
    volumes = Volumes(
        claims={
            f"default/multi-zone-pvc-{i}": claim(f"multi-zone-pvc-{i}", volumeName=f"pv-{i}")
            for i in range(2)
        },
        volumes={f"pv-{i}": zonal_volume(f"pv-{i}", terms=terms) for i in range(2)},
    )
    _expect_apart_in_zone_1_or_2(volumes, app, "pod")


@pytest.mark.parametrize("kind", ["local", "hostPath"])
def test_a_volume_on_an_existing_host_gets_no_new_node(kind):
    """Karpenter suite_test.go: VolumeUsage "should preserve unconstrained PV alternatives after ignoring
    hostname affinity" (Entries "for local volumes", "for hostpath volumes"), with the opposite outcome
    by design: Karpenter drops a local/hostPath volume's hostname terms and launches a node, which
    kube-scheduler's VolumeBinding filter (pkg/scheduler/framework/plugins/volumebinding,
    checkBoundClaims: the PV's node affinity must match the node) then refuses, since the volume
    lives on existing-host and the PV's other term names a zone no node has. karpy launches nothing
    for a pod no new node can take."""
    pv = zonal_volume(
        "hostname-or-zone-pv",
        terms=[[req(HOSTNAME, "In", "existing-host")], [req(ZONE, "In", "invalid-zone")]],
    )
    pv["spec"].pop("csi")
    pv["spec"][kind] = {"path": "/mnt/data"}
    volumes = Volumes(
        claims={
            "default/hostname-or-zone-pvc": claim("hostname-or-zone-pvc", volumeName="hostname-or-zone-pv")
        },
        volumes={"hostname-or-zone-pv": pv},
    )
    c = cluster()
    p = pod("hostname-or-zone-pod", claims=["hostname-or-zone-pvc"], cluster_volumes=volumes)
    c.provision([p])
    c.expect_not_scheduled(p)


def test_schedules_pods_using_a_storage_class_with_multiple_zones():
    """Karpenter suite_test.go: VolumeUsage "should schedule pods using a StorageClass with multiple zones in
    AllowedTopologies"."""
    sc = storage_class(
        "multi-zone-sc", topologies=[[{"key": ZONE, "values": [Z1]}], [{"key": ZONE, "values": [Z2]}]]
    )
    app = {"app": "multi-zone-sc-app"}
    volumes = Volumes(
        claims={
            f"default/multi-zone-pvc-{i}": claim(f"multi-zone-pvc-{i}", storageClassName="multi-zone-sc")
            for i in range(2)
        },
        classes={"multi-zone-sc": sc},
    )
    _expect_apart_in_zone_1_or_2(volumes, app, "sc-pod")


def test_schedules_when_a_multi_volume_alternative_remains_after_pruning():
    """Karpenter suite_test.go: VolumeUsage "should schedule pods when a valid multi-volume topology
    alternative remains after pruning disjoint branches".

    Karpenter's fake `special` label (only large types carry "optional", none "required") is played by
    kubernetes.io/arch: "optional" -> arm64, "required" -> an arch no type has.
    """
    optional, required = "arm64", "s390x"
    sc_a = storage_class(
        "pruned-overlap-a",
        topologies=[[{"key": ARCH, "values": [required]}], [{"key": ARCH, "values": [optional]}]],
    )
    sc_b = storage_class(
        "pruned-overlap-b",
        topologies=[
            [{"key": ZONE, "values": [Z1]}, {"key": ARCH, "values": [optional]}],
            [{"key": ZONE, "values": [Z2]}, {"key": ARCH, "values": [required]}],
        ],
    )
    volumes = Volumes(
        claims={
            "default/pvc-a": claim("pvc-a", storageClassName="pruned-overlap-a"),
            "default/pvc-b": claim("pvc-b", storageClassName="pruned-overlap-b"),
        },
        classes={"pruned-overlap-a": sc_a, "pruned-overlap-b": sc_b},
    )
    c = cluster()
    p = pod("pruned-overlap-pod", claims=["pvc-a", "pvc-b"], cluster_volumes=volumes)
    c.provision([p])
    node = c.expect_scheduled(p)
    assert (node.labels[ZONE], node.labels[ARCH]) == (Z1, optional)


@not_ported(
    "should not launch nodes for pod with storageClass that uses an unsupported provisioner",
    "should not launch nodes for pod with bound persistentVolume that uses an unsupported provisioner",
    "should not launch nodes for pod with storageClass that uses an unsupported topology key",
    reason="Karpenter's test injects its internal UnsupportedProvisioners/UnsupportedTopologyKeys sets; "
    "karpy has no such lists (it reads topology.ebs.csi.aws.com/zone as the zone)",
)
def test_unsupported_provisioners(title):
    """Karpenter suite_test.go: VolumeUsage (each test named by `title`)."""


def _expect_no_node(p: Pod) -> None:
    """The pod stays pending and no node is launched for it."""
    c = cluster()
    plan = c.provision([p])
    c.expect_not_scheduled(p)
    assert not plan.nodes


def _default_class_claim(pvc: dict) -> Volumes:
    """`pvc` (default/tmp-ephemeral) with a WaitForFirstConsumer default-storage-class in zone-1."""
    return Volumes(
        claims={"default/tmp-ephemeral": pvc},
        classes={"default-storage-class": storage_class("default-storage-class", zones=[Z1])},
    )


def test_node_in_the_class_topology_for_an_unbound_immediate_volume():
    """Karpenter suite_test.go: VolumeUsage "should not launch nodes for pod with unbound volume for
    volumeBindingMode immediate". karpy diverges (issue 24): such a claim is bound by the PV
    controller on its own, so karpy plans a node in the class's allowedTopologies (the same
    requirements Karpenter's volumetopology.go derives) and leaves the pod's bind to kube-scheduler
    (`Volumes.resolve(...).deferred`, added by the controller)."""
    volumes = Volumes(
        claims={"default/tmp-ephemeral": claim("tmp-ephemeral", storageClassName="default-storage-class")},
        classes={
            "default-storage-class": storage_class("default-storage-class", zones=[Z1], binding="Immediate")
        },
    )
    c = cluster()
    p = pod(claims=["tmp-ephemeral"], cluster_volumes=volumes)
    c.provision([p])
    assert c.expect_scheduled(p).labels[ZONE] == Z1


def test_no_node_for_a_deleting_claim():
    """Karpenter suite_test.go: VolumeUsage "should not launch nodes for pod with deleting
    persistentVolumeClaim"."""
    pvc = claim("tmp-ephemeral", storageClassName="default-storage-class")
    pvc["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    pvc["metadata"]["finalizers"] = ["kubernetes.io/pvc-protection"]
    _expect_no_node(pod(claims=["tmp-ephemeral"], cluster_volumes=_default_class_claim(pvc)))


def test_no_node_for_a_bound_volume_marked_for_deletion():
    """Karpenter suite_test.go: VolumeUsage "should not launch nodes for pod with bound persistentVolume that
    is marked for deletion"."""
    pv = zonal_volume("test-pv")
    pv["spec"]["csi"]["driver"] = "other-provider"
    pv["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    pv["metadata"]["finalizers"] = ["kubernetes.io/pv-protection"]
    name = "pv-pod"
    volumes = Volumes(
        claims={f"default/{name}-tmp-ephemeral": claim(f"{name}-tmp-ephemeral", volumeName="test-pv")},
        volumes={"test-pv": pv},
    )
    _expect_no_node(pod(name, ephemeral=[("tmp-ephemeral", None)], cluster_volumes=volumes))


def test_no_node_for_a_lost_claim():
    """Karpenter suite_test.go: VolumeUsage "should not launch nodes for pod with Lost
    persistentVolumeClaim"."""
    pvc = claim("tmp-ephemeral", storageClassName="default-storage-class")
    pvc["status"] = {"phase": "Lost"}
    _expect_no_node(pod(claims=["tmp-ephemeral"], cluster_volumes=_default_class_claim(pvc)))


@pytest.mark.parametrize("bind_completed", [False, True])
def test_claims_with_a_defined_volume_name(bind_completed):
    """Karpenter suite_test.go: VolumeUsage "should handle pods with PVCs with defined volumeName" (Entries
    "when pv.kubernetes.io/bind-completed is missing" -> not scheduled, "... is present" -> scheduled)."""
    pvc = claim("tmp-ephemeral", volumeName="test-pv", storageClassName="default-storage-class")
    if not bind_completed:
        del pvc["metadata"]["annotations"]
    pv = zonal_volume("test-pv")
    pv["spec"]["csi"]["driver"] = "other-provider"
    volumes = Volumes(
        claims={"default/tmp-ephemeral": pvc},
        volumes={"test-pv": pv},
        classes={
            "default-storage-class": storage_class(
                "default-storage-class", zones=[Z1], provisioner_name="other-provider"
            )
        },
    )
    c = cluster()
    p = pod(claims=["tmp-ephemeral"], cluster_volumes=volumes)
    c.provision([p])
    if bind_completed:
        c.expect_scheduled(p)
    else:
        c.expect_not_scheduled(p)


@pytest.mark.parametrize("storage_class_name", ["non-existent", ""])
def test_ephemeral_volume_without_a_storage_class_bound(storage_class_name):
    """Karpenter suite_test.go: VolumeUsage "should launch nodes for pods with ephemeral volume without a
    storage class when the PVC is bound" (Entries "non-existent storage class", "explicitly disabled storage
    class (empty string)")."""
    name = f"bound-{storage_class_name or 'empty'}"
    volumes = Volumes(
        claims={
            f"default/{name}-tmp-ephemeral": claim(
                f"{name}-tmp-ephemeral", storageClassName=storage_class_name, volumeName="test-pv"
            )
        },
        volumes={"test-pv": zonal_volume("test-pv")},
    )
    c = cluster()
    p = pod(name, ephemeral=[("tmp-ephemeral", storage_class_name)], cluster_volumes=volumes)
    c.provision([p])
    c.expect_scheduled(p)
    assert len(c.nodes) == 1


@pytest.mark.parametrize("storage_class_name", ["non-existent", ""])
def test_ephemeral_volume_without_a_storage_class_unbound(storage_class_name):
    """Karpenter suite_test.go: VolumeUsage "should not launch nodes for pods with ephemeral volume without a
    storage class when the PVC is unbound" (Entries "non-existent storage class", "explicitly disabled storage
    class (empty string)")."""
    _expect_no_node(pod(ephemeral=[("tmp-ephemeral", storage_class_name)], cluster_volumes=Volumes()))
