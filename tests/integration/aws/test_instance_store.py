"""`instanceStorePolicy: RAID0` on moto (issue 35): the launch template of an NVMe type carries each
family's RAID0 instruction in its user data (read back with the real parser of its format,
tests/unit/cloud/test_userdata.py READERS), and the type's ephemeral-storage capacity, which the
Node carries, is the instance store moto's DescribeInstanceTypes reports (Karpenter AWS
`ephemeralStorage`: `InstanceStorageInfo.TotalSizeInGB` as `%dG`)."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from extender.api import nodeclass as nc
from extender.api.provisioner import Provisioner
from extender.api.resources import EPHEMERAL_STORAGE
from extender.cloud.aws.provider import AWSCloudProvider
from extender.cloud.types import LaunchRequest
from extender.scheduling.instancetypes import NodeSettings
from tests.integration.aws.test_node_families import FAMILIES, templates_of
from tests.unit.cloud.test_userdata import READERS

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("family", list(FAMILIES))
def test_raid0_is_in_every_familys_user_data_and_the_nvme_is_the_ephemeral_storage(
    family: str,
    provider_at: Callable[..., AWSCloudProvider],
    launch: Callable[..., LaunchRequest],
    clients: Any,
) -> None:
    version, _ = FAMILIES[family]
    provider = provider_at(version)
    node_class = nc.NodeClass(ami_family=family, instance_store_policy=nc.RAID0)
    provisioner = Provisioner(name=f"nvme-{family.lower()}", provider=node_class)
    (data,) = templates_of(
        provider,
        launch(
            ["m5d.large"],
            provisioner=provisioner,
            capacity_types=["on-demand"],
            labels={"run": uuid.uuid4().hex[:8]},
        ),
    ).values()
    assert READERS[family](base64.b64decode(data["UserData"]).decode()).raid0
    (info,) = clients.ec2.describe_instance_types(InstanceTypes=["m5d.large"])["InstanceTypes"]
    disks_gb = info["InstanceStorageInfo"]["TotalSizeInGB"]
    m5d = next(t for t in provider.get_instance_types() if t.name == "m5d.large")
    node = m5d.for_node(NodeSettings.of(provisioner.kubelet, node_class))
    assert node.capacity.get(EPHEMERAL_STORAGE) == disks_gb * 1e9 and disks_gb > 0

    plain = Provisioner(name=f"root-{family.lower()}", provider=nc.NodeClass(ami_family=family))
    (data,) = templates_of(
        provider,
        launch(
            ["m5d.large"],
            provisioner=plain,
            capacity_types=["on-demand"],
            labels={"run": uuid.uuid4().hex[:8]},
        ),
    ).values()
    assert not READERS[family](base64.b64decode(data["UserData"]).decode()).raid0
