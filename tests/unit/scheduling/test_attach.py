"""EBS CSI attach limits of new nodes (aws-ebs-csi-driver v1.30 getVolumesLimit, with two ENIs
attached when the driver starts) and kube-scheduler's NodeVolumeLimits before binding."""

from __future__ import annotations

from functools import partial

import pytest

from extender.api.resources import Resources
from extender.scheduling import attach
from extender.scheduling.admission import check
from tests import builders
from tests.model_builders import existing_node


@pytest.mark.parametrize(
    ("raw", "limit"),
    [
        # Nitro: 28 - 2 ENIs - root (the driver's worked example, with one ENI, gives 26).
        ({"InstanceType": "m5.large", "Hypervisor": "nitro"}, 25),
        # Nitro with one NVMe instance-store disk sharing the slots.
        (
            {
                "InstanceType": "g4dn.xlarge",
                "Hypervisor": "nitro",
                "InstanceStorageInfo": {"Disks": [{"Count": 1, "SizeInGB": 125}]},
            },
            24,
        ),
        ({"InstanceType": "m5.metal", "BareMetal": True}, 25),
        # Xen: 39 - root.
        ({"InstanceType": "c4.large", "Hypervisor": "xen"}, 38),
        # Dedicated slots, no ENI sharing: 32 up to 12xlarge, 128 at 48xlarge, less the root.
        ({"InstanceType": "m7i.large", "Hypervisor": "nitro"}, 31),
        ({"InstanceType": "m7i.48xlarge", "Hypervisor": "nitro"}, 127),
    ],
)
def test_ebs_attach_limit_of_a_new_node(raw, limit):
    assert attach.ebs_limit(raw) == limit


def test_binding_respects_the_csinode_limit():
    """kube-scheduler NodeVolumeLimits: existing + new volumes of a driver over its CSINode count
    refuse the node; a driver the CSINode does not list is unlimited."""

    pod = partial(builders.pod, "p", uid="", image=None)
    node = existing_node(
        zone=None,
        hostname=False,
        instance_type="m5.large",
        allocatable=Resources.parse({"cpu": "2", "memory": "8Gi", "pods": 29}),
        volume_limits=(("ebs.csi.aws.com", 8),),
        volumes_in_use=(("ebs.csi.aws.com", 7),),
    )
    assert check(pod(csi_volumes={"ebs.csi.aws.com": 1}), node, [node]) is None
    reason = check(pod(csi_volumes={"ebs.csi.aws.com": 2}), node, [node])
    assert reason is not None and reason.startswith("node(s) exceed max volume count")
    assert check(pod(csi_volumes={"efs.csi.aws.com": 50}), node, [node]) is None
