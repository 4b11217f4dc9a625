"""Launch templates per AMI family on moto: the AMI each family publishes in SSM (seeded by
hack/localcluster/awsseed.py at the real parameter paths) for amd64, arm64, NVIDIA and Neuron
types, the family's block devices and the metadata options, and user data its own format reads.
moto applies only ImageId, tags and UserData of a template to an instance, so the template is
what is checked."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from extender.api import nodeclass as nc
from extender.api.ec2nodeclass import load_ec2nodeclass
from extender.api.kubelet import KubeletConfiguration
from extender.api.nodepool import load_nodepool
from extender.api.provisioner import Provisioner
from extender.cloud.aws.provider import AWSCloudProvider
from extender.cloud.types import CloudError, LaunchRequest
from extender.settings import Settings
from tests.builders import nodepool_manifest
from tests.unit.api.test_nodepool import node_class
from tests.unit.cloud.test_launchtemplates import CONFIGURED_VOLUME, CONFIGURED_VOLUME_EC2
from tests.unit.cloud.test_userdata import READERS

pytestmark = pytest.mark.integration

GIB = 2**30
IMDSV2 = {
    "HttpEndpoint": "enabled",
    "HttpProtocolIpv6": "disabled",
    "HttpPutResponseHopLimit": 2,
    "HttpTokens": "required",
}
DEFAULT_DEVICES = {
    nc.AL2023: [
        {"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": 20, "VolumeType": "gp3", "Encrypted": True}}
    ],
    nc.AL2: [{"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": 20, "VolumeType": "gp3", "Encrypted": True}}],
    nc.BOTTLEROCKET: [
        {"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": 4, "VolumeType": "gp3", "Encrypted": True}},
        {"DeviceName": "/dev/xvdb", "Ebs": {"VolumeSize": 20, "VolumeType": "gp3", "Encrypted": True}},
    ],
    nc.UBUNTU: [
        {"DeviceName": "/dev/sda1", "Ebs": {"VolumeSize": 20, "VolumeType": "gp3", "Encrypted": True}}
    ],
}
#: family -> (Kubernetes version, instance type -> the seeded AMI it must boot)
FAMILIES = {
    nc.AL2023: (
        "1.37",
        {"m5.large": "amd64", "m6g.large": "arm64", "g4dn.xlarge": "gpu", "inf1.xlarge": "AL2023/neuron"},
    ),
    nc.AL2: ("1.32", {"m5.large": "AL2/amd64", "m6g.large": "AL2/arm64", "g4dn.xlarge": "AL2/gpu"}),
    nc.BOTTLEROCKET: (
        "1.37",
        {
            "m5.large": "Bottlerocket/amd64",
            "m6g.large": "Bottlerocket/arm64",
            "g4dn.xlarge": "Bottlerocket/amd64-nvidia",
        },
    ),
    nc.UBUNTU: ("1.37", {"m5.large": "Ubuntu/amd64", "m6g.large": "Ubuntu/arm64"}),
}


def templates_of(provider: AWSCloudProvider, request: LaunchRequest) -> dict[str, dict[str, Any]]:
    """Launch `request` (on-demand) and read back, per instance type, the template its override names."""
    fleets: list[dict[str, Any]] = []
    ec2 = provider.clients.ec2
    ec2.meta.events.register(
        "provide-client-params.ec2.CreateFleet", lambda params, **_: fleets.append(params)
    )
    result = provider.create(request)
    ec2.terminate_instances(InstanceIds=[i.id for i in result.instances])
    by_type: dict[str, dict[str, Any]] = {}
    for config in fleets[0]["LaunchTemplateConfigs"]:
        name = config["LaunchTemplateSpecification"]["LaunchTemplateName"]
        (version,) = ec2.describe_launch_template_versions(LaunchTemplateName=name)["LaunchTemplateVersions"]
        for override in config["Overrides"]:
            by_type[override["InstanceType"]] = version["LaunchTemplateData"]
    (instance,) = result.instances
    # The instance records the AMI it booted: what the Node's AMI annotation (and drift) reads.
    assert instance.image_id == by_type[instance.instance_type]["ImageId"]
    return by_type


@pytest.mark.parametrize("family", list(FAMILIES))
def test_launch_template_per_family_holds_its_ami_block_devices_and_imds(
    family: str,
    settings: Settings,
    provider_at: Callable[..., AWSCloudProvider],
    launch: Callable[..., LaunchRequest],
    aws: Any,
) -> None:
    version, expected = FAMILIES[family]
    provider = provider_at(version)
    # A label unique to this run: templates of its own even on a reused moto.
    run = uuid.uuid4().hex[:8]
    provisioner = Provisioner(name=f"p-{family.lower()}", provider=nc.NodeClass(ami_family=family))
    templates = templates_of(
        provider,
        launch(list(expected), provisioner=provisioner, capacity_types=["on-demand"], labels={"run": run}),
    )
    assert set(templates) == set(expected)
    catalog = {t.name: t for t in provider.get_instance_types()}
    for instance_type, key in expected.items():
        # What drift asks: the AMI this Provisioner's node of that type would boot now.
        assert provider.image_id(provisioner, catalog[instance_type]) == aws.amis[key]
        data = templates[instance_type]
        assert data["ImageId"] == aws.amis[key], (instance_type, key)
        assert data["BlockDeviceMappings"] == DEFAULT_DEVICES[family]
        assert data["MetadataOptions"] == IMDSV2
        read = READERS[family](base64.b64decode(data["UserData"]).decode())
        assert (read.cluster, read.endpoint, read.ca) == (
            aws.cluster_name,
            settings.cluster_endpoint,
            "Q0EgYnVuZGxl",
        )
        assert read.cluster_dns == "10.100.0.10" and read.labels["run"] == run


def test_configured_block_devices_metadata_kubelet_and_custom_ami(
    settings: Settings,
    provider_at: Callable[..., AWSCloudProvider],
    launch: Callable[..., LaunchRequest],
    aws: Any,
) -> None:
    provider = provider_at("1.37")
    # moto drops the Architecture of images registered through it, so select one of its own.
    (image, *_) = provider.clients.ec2.describe_images(
        Owners=["amazon"], Filters=[{"Name": "architecture", "Values": ["x86_64"]}]
    )["Images"]
    node_class = nc.NodeClass(
        ami_family=nc.CUSTOM,
        ami_selector={"aws-ids": image["ImageId"]},
        user_data=f"#!/bin/bash\necho {uuid.uuid4().hex}\n",
        block_device_mappings=(CONFIGURED_VOLUME,),
        metadata_options=nc.MetadataOptions(http_put_response_hop_limit=1, http_tokens="required"),
        detailed_monitoring=True,
    )
    provisioner = Provisioner(name="custom", provider=node_class, kubelet=KubeletConfiguration(max_pods=40))
    (data,) = templates_of(
        provider, launch(["m5.large"], provisioner=provisioner, capacity_types=["on-demand"])
    ).values()
    assert data["ImageId"] == image["ImageId"]
    assert data["BlockDeviceMappings"] == [CONFIGURED_VOLUME_EC2]
    assert data["MetadataOptions"]["HttpPutResponseHopLimit"] == 1
    assert data["Monitoring"] == {"Enabled": True}
    # Custom: the user's user data only.
    assert base64.b64decode(data["UserData"]).decode() == node_class.user_data


def test_an_ec2nodeclass_public_ip_setting_reaches_the_launch_template(
    provider_at: Callable[..., AWSCloudProvider],
    launch: Callable[..., LaunchRequest],
    aws: Any,
) -> None:
    """EC2NodeClass `associatePublicIPAddress: false`, from the manifest through the NodePool to
    CreateFleet's launch template: the primary interface carries it with the node security group,
    as Karpenter's generateNetworkInterfaces writes it (AWS@v1.0 pkg/providers/launchtemplate)."""
    discovery = [{"tags": {"karpenter.sh/discovery": aws.cluster_name}}]
    manifest = node_class(
        subnetSelectorTerms=discovery, securityGroupSelectorTerms=discovery, associatePublicIPAddress=False
    )
    klass = load_ec2nodeclass(manifest, cluster_name=aws.cluster_name)
    pool = load_nodepool(nodepool_manifest(), {"default": klass})
    provider = provider_at("1.37")
    (data,) = templates_of(
        provider, launch(["m5.large"], provisioner=pool, capacity_types=["on-demand"])
    ).values()
    groups = provider.clients.ec2.describe_security_groups(
        Filters=[{"Name": "tag:karpenter.sh/discovery", "Values": [aws.cluster_name]}]
    )["SecurityGroups"]
    assert data["NetworkInterfaces"] == [
        {"DeviceIndex": 0, "AssociatePublicIpAddress": False, "Groups": sorted(g["GroupId"] for g in groups)}
    ]
    assert "SecurityGroupIds" not in data


def test_al2_is_refused_where_aws_publishes_no_al2_ami(
    provider_at: Callable[..., AWSCloudProvider],
    launch: Callable[..., LaunchRequest],
) -> None:
    provider = provider_at("1.37")
    provisioner = Provisioner(name="old", provider=nc.NodeClass(ami_family=nc.AL2))
    with pytest.raises(CloudError, match=r"no AL2 EKS AMI for Kubernetes 1\.37 \(1\.32 is the last\)"):
        provider.create(launch(["m5.large"], provisioner=provisioner, capacity_types=["on-demand"]))


def test_a_newly_published_ami_is_resolved_after_the_cache_ttl(
    settings: Settings, provider_at: Callable[..., AWSCloudProvider], clock: Any, aws: Any
) -> None:
    from hack.localcluster import awsseed

    ssm_root = f"/karpy-test-{uuid.uuid4().hex[:8]}"
    scoped = replace(settings, aws=replace(settings.aws, ssm_root=ssm_root))
    provider = provider_at(aws.k8s_version, settings=scoped)
    ssm = provider.clients.ssm
    m5 = next(t for t in provider.get_instance_types() if t.name == "m5.large")
    awsseed.publish_ami(ssm, ssm_root, aws.k8s_version, "amd64", aws.amis["amd64"])
    assert provider.amis.resolve(nc.NodeClass(), m5) == aws.amis["amd64"]
    awsseed.publish_ami(ssm, ssm_root, aws.k8s_version, "amd64", aws.amis["AL2023/neuron"])
    assert provider.amis.resolve(nc.NodeClass(), m5) == aws.amis["amd64"]  # cached
    clock.tick(61)
    assert provider.amis.resolve(nc.NodeClass(), m5) == aws.amis["AL2023/neuron"]
