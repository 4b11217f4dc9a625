"""Launch template identity and data (pure); user data per family is in test_userdata.py."""

from __future__ import annotations

import base64

from extender.api.nodeclass import EBS, GIB, BlockDeviceMapping, MetadataOptions
from extender.cloud.aws.launchtemplates import LaunchTemplateSpec


def spec(**changes: object) -> LaunchTemplateSpec:
    fields: dict = {
        "image_id": "ami-1",
        "security_group_ids": ["sg-2", "sg-1"],
        "instance_profile": "nodes",
        "user_data": "#!/bin/bash\n",
        "tags": {"team": "x"},
    }
    fields.update(changes)
    return LaunchTemplateSpec.of(**fields)


def test_equal_inputs_name_the_same_template_whatever_their_order() -> None:
    assert spec().name("demo") == spec(security_group_ids=["sg-1", "sg-2"]).name("demo")
    assert spec().name("demo").startswith("karpy-demo-")


def test_each_input_changes_the_template_name() -> None:
    base = spec().name("demo")
    for changed in (
        spec(image_id="ami-2"),
        spec(security_group_ids=["sg-1"]),
        spec(instance_profile="other"),
        spec(user_data="#!/bin/sh\n"),
        spec(tags={"team": "y"}),
        spec(block_device_mappings=[BlockDeviceMapping("/dev/xvda", EBS(volume_size=30 * GIB))]),
        spec(metadata_options=MetadataOptions(http_put_response_hop_limit=1)),
        spec(detailed_monitoring=True),
        spec(associate_public_ip_address=False),
        spec(associate_public_ip_address=True),
        spec(efa_interfaces=1),
    ):
        assert changed.name("demo") != base
    assert spec().name("other") != base
    assert spec(associate_public_ip_address=False).name("demo") != spec(
        associate_public_ip_address=True
    ).name("demo")


def test_names_of_templates_without_a_public_ip_setting_are_unchanged() -> None:
    """The names main computed before `associate_public_ip_address` existed (a changed name would
    make every template again after an upgrade)."""
    assert spec().name("demo") == "karpy-demo-cfd42bf4357ef840"
    assert spec(detailed_monitoring=True).name("demo") == "karpy-demo-20232ac366576a12"


def test_a_public_ip_setting_goes_on_the_primary_interface_with_the_security_groups() -> None:
    """Karpenter's generateNetworkInterfaces (AWS@v1.0 pkg/providers/launchtemplate/launchtemplate.go):
    DeviceIndex 0 carries AssociatePublicIpAddress and the groups; EC2 refuses SecurityGroupIds
    beside NetworkInterfaces."""
    data = spec(associate_public_ip_address=False).template_data()
    assert data["NetworkInterfaces"] == [
        {"DeviceIndex": 0, "AssociatePublicIpAddress": False, "Groups": ["sg-1", "sg-2"]}
    ]
    assert "SecurityGroupIds" not in data
    assert "NetworkInterfaces" not in spec().template_data()


def test_a_public_ip_setting_goes_on_every_efa_interface() -> None:
    """generateNetworkInterfaces sets AssociatePublicIpAddress on each EFA interface it builds."""
    interfaces = spec(efa_interfaces=2, associate_public_ip_address=False).template_data()[
        "NetworkInterfaces"
    ]
    assert [(i["NetworkCardIndex"], i["AssociatePublicIpAddress"]) for i in interfaces] == [
        (0, False),
        (1, False),
    ]
    assert all("AssociatePublicIpAddress" not in i for i in spec(efa_interfaces=2).network_interfaces() or ())


def test_template_data_encodes_user_data_and_names_the_profile() -> None:
    data = spec().template_data()
    assert base64.b64decode(data["UserData"]).decode() == "#!/bin/bash\n"
    assert data["SecurityGroupIds"] == ["sg-1", "sg-2"]
    assert data["IamInstanceProfile"] == {"Name": "nodes"}
    assert data["MetadataOptions"]["HttpTokens"] == "required"
    assert "IamInstanceProfile" not in spec(instance_profile="").template_data()


#: A fully configured EBS volume and the BlockDeviceMapping EC2 is given for it.
CONFIGURED_VOLUME = BlockDeviceMapping(
    "/dev/xvda",
    EBS(
        volume_size=100 * GIB,
        volume_type="gp3",
        iops=4000,
        throughput=250,
        encrypted=True,
        kms_key_id="arn:aws:kms:us-west-2:111122223333:key/k",
        delete_on_termination=True,
    ),
)
CONFIGURED_VOLUME_EC2 = {
    "DeviceName": "/dev/xvda",
    "Ebs": {
        "VolumeSize": 100,
        "VolumeType": "gp3",
        "Iops": 4000,
        "Throughput": 250,
        "Encrypted": True,
        "KmsKeyId": "arn:aws:kms:us-west-2:111122223333:key/k",
        "DeleteOnTermination": True,
    },
}


def test_template_data_carries_block_devices_and_metadata_options() -> None:
    data = spec(
        block_device_mappings=[CONFIGURED_VOLUME, BlockDeviceMapping("/dev/xvdb", EBS(snapshot_id="snap-1"))],
        metadata_options=MetadataOptions(http_tokens="optional", http_put_response_hop_limit=1),
        detailed_monitoring=True,
    ).template_data()
    assert data["BlockDeviceMappings"] == [
        CONFIGURED_VOLUME_EC2,
        {"DeviceName": "/dev/xvdb", "Ebs": {"SnapshotId": "snap-1"}},
    ]
    assert data["MetadataOptions"] == {
        "HttpEndpoint": "enabled",
        "HttpProtocolIpv6": "disabled",
        "HttpPutResponseHopLimit": 1,
        "HttpTokens": "optional",
    }
    assert data["Monitoring"] == {"Enabled": True}


def test_a_size_that_is_not_whole_gib_rounds_up() -> None:
    mapping = BlockDeviceMapping("/dev/xvda", EBS(volume_size=20e9))  # "20G", as Karpenter v0.10 wrote
    assert spec(block_device_mappings=[mapping]).template_data()["BlockDeviceMappings"][0]["Ebs"] == {
        "VolumeSize": 19
    }


def test_efa_interfaces_one_per_network_card_carry_the_security_groups() -> None:
    """Karpenter AWS v1.14.1 `launchtemplate.go` generateNetworkInterfaces (EFACount != 0): card i,
    device index 0 on card 0 and 1 elsewhere, InterfaceType "efa", the node's groups on each
    interface and none on the instance (`types.go`: SecurityGroupIds only without interfaces)."""
    data = spec(efa_interfaces=4).template_data()
    assert "SecurityGroupIds" not in data
    assert data["NetworkInterfaces"] == [
        {
            "NetworkCardIndex": i,
            "DeviceIndex": 0 if i == 0 else 1,
            "InterfaceType": "efa",
            "Groups": ["sg-1", "sg-2"],
        }
        for i in range(4)
    ]
    plain = spec().template_data()
    assert "NetworkInterfaces" not in plain and plain["SecurityGroupIds"] == ["sg-1", "sg-2"]


def test_templates_without_efa_keep_the_names_they_had() -> None:
    # The name karpy gave this template before EFA interfaces were part of its identity.
    assert spec().name("demo") == "karpy-demo-cfd42bf4357ef840"
