"""`instanceStorePolicy: RAID0` (Karpenter AWS v0.34+, EC2NodeClass; karpy's AWSNodeTemplate and
Provisioner `provider` take it under the same name): the one value Karpenter's CRD enumerates is
accepted, anything else refused naming the field; a type's instance-store NVMe becomes its
ephemeral-storage capacity (Karpenter `ephemeralStorage`: `TotalSizeInGB` as `%dG`, its test
"should launch instances w/ instance storage for ephemeral storage resource requests when disks are
mounted for ephemeral-storage": m6idn.32xlarge has 7600G)."""

from __future__ import annotations

from typing import Any

from extender.api import labels as wk
from extender.api import nodeclass as nc
from extender.api.ec2nodeclass import load_ec2nodeclass, validate_ec2nodeclass
from extender.api.kubelet import KubeletConfiguration
from extender.api.nodeclass_schema import NodeClassSchema
from extender.api.resources import EPHEMERAL_STORAGE
from extender.scheduling.instancetypes import DEFAULT_ROOT_VOLUME, InstanceType, NodeSettings


def node_class(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "local"},
        "spec": {
            "role": "KarpenterNodeRole",
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "c"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "c"}}],
            **spec,
        },
    }


def test_raid0_is_accepted_on_both_apis_and_anything_else_refused_by_name() -> None:
    loaded = load_ec2nodeclass(node_class(instanceStorePolicy="RAID0"), cluster_name="c")
    assert loaded.node_class.instance_store_policy == nc.RAID0
    assert validate_ec2nodeclass(node_class(instanceStorePolicy="RAID1")) == [
        "spec.instanceStorePolicy: Must be one of: RAID0."
    ]
    template = NodeClassSchema().load({"instanceProfile": "p", "instanceStorePolicy": "RAID0"})
    assert template.instance_store_policy == nc.RAID0


def test_an_unmanaged_launch_template_fixes_the_disks_itself() -> None:
    errors = NodeClassSchema().validate({"launchTemplate": "mine", "instanceStorePolicy": "RAID0"})
    assert errors == {"instanceStorePolicy": ["cannot be set together with launchTemplate"]}


def m6idn(settings: NodeSettings) -> InstanceType:
    return InstanceType.build(
        name="m6idn.32xlarge",
        cpu=128,
        memory=512 * 2**30,
        arch="amd64",
        max_pods=737,
        type_labels={wk.INSTANCE_LOCAL_NVME: "7600"},
        settings=settings,
    )


def test_raid0_makes_the_instance_store_the_ephemeral_storage_capacity() -> None:
    raid0 = NodeSettings.of(KubeletConfiguration(), nc.NodeClass(instance_store_policy=nc.RAID0))
    plain = NodeSettings.of(KubeletConfiguration(), nc.NodeClass())
    assert m6idn(raid0).capacity.get(EPHEMERAL_STORAGE) == 7600e9
    assert m6idn(plain).capacity.get(EPHEMERAL_STORAGE) == DEFAULT_ROOT_VOLUME
    # A type without instance store keeps its root volume under the policy.
    no_disks = InstanceType.build(
        name="m5.large", cpu=2, memory=8 * 2**30, arch="amd64", max_pods=29, settings=raid0
    )
    assert no_disks.capacity.get(EPHEMERAL_STORAGE) == DEFAULT_ROOT_VOLUME
    # And the same type re-derived for a node under other settings follows them.
    assert m6idn(plain).for_node(raid0).capacity.get(EPHEMERAL_STORAGE) == 7600e9
