"""Validation of the node configuration (inline provider, AWSNodeTemplate) and kubelet settings:
what a kubelet or EC2 would refuse is refused at admission, naming the field."""

from __future__ import annotations

from typing import Any

import pytest
from marshmallow import ValidationError

from extender.api import nodeclass as nc
from extender.api.nodetemplate import default_node_template, load_node_template, validate_node_template
from extender.api.provisioner_schema import load_provisioner, validate_provisioner
from tests import builders

GIB = 2**30


def provisioner(**spec: Any) -> dict[str, Any]:
    return builders.provisioner_manifest("p", **spec)


def template(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": nc.API_VERSION, "kind": nc.KIND, "metadata": {"name": "t"}, "spec": spec}


def provider(**fields: Any) -> dict[str, Any]:
    return {"instanceProfile": "nodes", **fields}


INVALID_KUBELET = [
    ({"maxPods": 0}, "spec.kubeletConfiguration.maxPods:"),
    ({"podsPerCore": -1}, "spec.kubeletConfiguration.podsPerCore: cannot be negative"),
    (
        {"clusterDNS": ["10.0.0.300"]},
        'spec.kubeletConfiguration.clusterDNS[0]: "10.0.0.300" is not an IP address',
    ),
    ({"kubeReserved": {"gpu": "1"}}, 'spec.kubeletConfiguration.kubeReserved["gpu"]: not in [cpu memory'),
    ({"systemReserved": {"memory": "-1Gi"}}, 'spec.kubeletConfiguration.systemReserved["memory"]: negative'),
    ({"systemReserved": {"pid": "1.5"}}, 'spec.kubeletConfiguration.systemReserved["pid"]: must be a whole'),
    (
        {"evictionHard": {"memory.free": "1Gi"}},
        'spec.kubeletConfiguration.evictionHard["memory.free"]: not in',
    ),
    ({"evictionHard": {"nodefs.available": "120%"}}, 'evictionHard["nodefs.available"]: a percentage must'),
    ({"evictionHard": {"memory.available": "lots"}}, 'evictionHard["memory.available"]: invalid quantity'),
    (
        {"evictionSoft": {"memory.available": "1Gi"}},
        'spec.kubeletConfiguration.evictionSoftGracePeriod["memory.available"]: missing',
    ),
    (
        {"evictionSoftGracePeriod": {"memory.available": "1m"}},
        'spec.kubeletConfiguration.evictionSoftGracePeriod["memory.available"]: evictionSoft does not set',
    ),
    (
        {"evictionSoft": {"memory.available": "1Gi"}, "evictionSoftGracePeriod": {"memory.available": "90"}},
        'evictionSoftGracePeriod["memory.available"]: "90" is not a duration',
    ),
    ({"imageGCHighThresholdPercent": 101}, "spec.kubeletConfiguration.imageGCHighThresholdPercent:"),
    (
        {"imageGCHighThresholdPercent": 50, "imageGCLowThresholdPercent": 70},
        "spec.kubeletConfiguration.imageGCLowThresholdPercent: 70 must be below",
    ),
    (
        {"imageGCLowThresholdPercent": 90},
        "imageGCLowThresholdPercent: 90 must be below imageGCHighThresholdPercent (85",
    ),
    ({"cpuCFSQuota": "no"}, "spec.kubeletConfiguration.cpuCFSQuota:"),
]


@pytest.mark.parametrize(("kubelet", "expected"), INVALID_KUBELET)
def test_kubelet_values_a_kubelet_refuses_are_refused_with_the_field_path(
    kubelet: dict[str, Any], expected: str
) -> None:
    problems = validate_provisioner(provisioner(kubeletConfiguration=kubelet, provider=provider()))
    assert any(expected in p for p in problems), problems


def test_kubelet_settings_load_into_the_model() -> None:
    loaded = load_provisioner(
        provisioner(
            provider=provider(),
            kubeletConfiguration={
                "clusterDNS": ["10.100.0.10"],
                "maxPods": 50,
                "podsPerCore": 10,
                "systemReserved": {"cpu": "100m", "memory": 100, "pid": 1000},
                "kubeReserved": {"ephemeral-storage": "1Gi"},
                "evictionHard": {"memory.available": "5%", "nodefs.available": "10%"},
                "evictionSoft": {"memory.available": "10%"},
                "evictionSoftGracePeriod": {"memory.available": "1m30s"},
                "evictionMaxPodGracePeriod": 60,
                "imageGCHighThresholdPercent": 90,
                "imageGCLowThresholdPercent": 70,
                "cpuCFSQuota": True,
            },
        )
    )
    k = loaded.kubelet
    assert (k.max_pods, k.pods_per_core, k.eviction_max_pod_grace_period, k.cpu_cfs_quota) == (
        50,
        10,
        60,
        True,
    )
    assert k.system_reserved == {"cpu": "100m", "memory": "100", "pid": "1000"}
    assert k.eviction_soft_grace_period == {"memory.available": "1m30s"}


INVALID_PROVIDER = [
    (
        {"amiFamily": "Windows2022"},
        'spec.provider.amiFamily: "Windows2022" is not supported: karpy launches Linux',
    ),
    (
        {"amiFamily": "Debian"},
        'spec.provider.amiFamily: "Debian" not in [AL2023 AL2 Bottlerocket Ubuntu Custom]',
    ),
    ({"amiFamily": "Custom"}, "spec.provider.amiSelector: a Custom AMI family needs amiSelector"),
    ({"amiSelector": {}}, "spec.provider.amiSelector: must not be empty"),
    ({"blockDeviceMappings": [{"deviceName": "/dev/xvda"}]}, "spec.provider.blockDeviceMappings[0].ebs:"),
    (
        {"blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"volumeType": "gp3"}}]},
        "blockDeviceMappings[0].ebs.volumeSize: volumeSize or snapshotID is required",
    ),
    (
        {"blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "100Ti"}}]},
        'blockDeviceMappings[0].ebs.volumeSize: "100Ti" must be above 0 and at most 64Ti',
    ),
    (
        {
            "blockDeviceMappings": [
                {"deviceName": "/dev/xvda", "ebs": {"volumeSize": "20Gi", "volumeType": "gp4"}}
            ]
        },
        'blockDeviceMappings[0].ebs.volumeType: "gp4" not in',
    ),
    (
        {"blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "20Gi", "iops": 100}}]},
        "blockDeviceMappings[0].ebs.iops: 100 is outside 3000-16000 for gp3",
    ),
    (
        {
            "blockDeviceMappings": [
                {"deviceName": "x", "ebs": {"volumeSize": "20Gi", "volumeType": "gp2", "iops": 3000}}
            ]
        },
        "blockDeviceMappings[0].ebs.iops: only [gp3 io1 io2] volumes take iops",
    ),
    (
        {"blockDeviceMappings": [{"deviceName": "x", "ebs": {"volumeSize": "20Gi", "throughput": 2000}}]},
        "blockDeviceMappings[0].ebs.throughput: 2000 is outside 125-1000",
    ),
    (
        {
            "blockDeviceMappings": [
                {"deviceName": "x", "ebs": {"volumeSize": "1Gi", "kmsKeyID": "k", "encrypted": False}}
            ]
        },
        "blockDeviceMappings[0].ebs.kmsKeyID: a KMS key needs encrypted: true",
    ),
    (
        {"blockDeviceMappings": [{"deviceName": "x", "ebs": {"volumeSize": "1Gi", "size": 2}}]},
        "blockDeviceMappings[0].ebs.size: Unknown field",
    ),
    (
        {"metadataOptions": {"httpTokens": "maybe"}},
        'spec.provider.metadataOptions.httpTokens: "maybe" not in',
    ),
    (
        {"metadataOptions": {"httpPutResponseHopLimit": 65}},
        "spec.provider.metadataOptions.httpPutResponseHopLimit:",
    ),
    (
        {"amiFamily": "Bottlerocket", "userData": "echo hi"},
        "spec.provider.userData: Bottlerocket user data is not TOML",
    ),
    (
        {"launchTemplate": "lt", "userData": "x"},
        "spec.provider.userData: cannot be set together with launchTemplate",
    ),
]


@pytest.mark.parametrize(("fields", "expected"), INVALID_PROVIDER)
def test_provider_values_ec2_refuses_are_refused_with_the_field_path(
    fields: dict[str, Any], expected: str
) -> None:
    problems = validate_provisioner(provisioner(provider=provider(**fields)))
    assert any(expected in p for p in problems), problems
    # The same rule holds in an AWSNodeTemplate, under its own path.
    in_template = expected.replace("spec.provider.", "spec.")
    assert any(in_template in p for p in validate_node_template(template(**provider(**fields)))), in_template
    # The same rule holds in an AWSNodeTemplate, under its own path.
    problems = validate_node_template(template(**provider(**fields)))
    assert any(
        p.startswith(expected.replace("spec.provider.", "spec.")) for p in problems
    ) or not expected.startswith("spec.provider."), problems


def test_provider_and_provider_ref_are_exclusive() -> None:
    problems = validate_provisioner(provisioner(provider=provider(), providerRef={"name": "t"}))
    assert problems == ["spec.providerRef: provider and providerRef are mutually exclusive: set one"]


def test_provider_ref_resolves_to_the_template_and_a_missing_one_is_named() -> None:
    name, node_class = load_node_template(
        default_node_template(
            template(
                amiFamily="Bottlerocket",
                blockDeviceMappings=[
                    {"deviceName": "/dev/xvda", "ebs": {"volumeSize": "4Gi", "volumeType": "gp3"}},
                    {"deviceName": "/dev/xvdb", "ebs": {"volumeSize": "100Gi", "volumeType": "gp3"}},
                ],
                metadataOptions={"httpPutResponseHopLimit": 1},
            ),
            cluster_name="demo",
            instance_profile="nodes",
        )
    )
    assert name == "t" and node_class.family == nc.BOTTLEROCKET
    assert node_class.subnet_selector == (nc.SelectorTerm(tags={"kubernetes.io/cluster/demo": "*"}),)
    assert node_class.instance_profile == "nodes"
    assert node_class.ephemeral_storage() == 100 * GIB
    assert node_class.metadata_options == nc.MetadataOptions(http_put_response_hop_limit=1)
    loaded = load_provisioner(provisioner(providerRef={"name": "t"}), {"t": node_class})
    assert loaded.provider is node_class and loaded.provider_ref == "t"
    with pytest.raises(ValidationError) as refused:
        load_provisioner(provisioner(providerRef={"name": "t"}), {})
    assert refused.value.messages == ['spec.providerRef.name: AWSNodeTemplate "t" not found']


def test_defaults_are_al2023_imdsv2_and_the_familys_root_volume() -> None:
    node_class = load_provisioner(provisioner(provider=provider())).provider
    assert node_class.family == nc.AL2023
    assert node_class.metadata_options.http_tokens == "required"
    assert node_class.block_devices() == (
        nc.BlockDeviceMapping("/dev/xvda", nc.EBS(20 * GIB, "gp3", encrypted=True)),
    )
