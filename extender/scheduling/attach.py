"""CSI volume attach limits, as kube-scheduler's NodeVolumeLimits applies them.

A node takes at most its limit of volumes of each CSI driver (`CSINode.spec.drivers[].allocatable
.count`; a driver without one, or a node without a CSINode, is unlimited). karpy packs a pod's
distinct CSI volumes as one more dimension per driver, `attachable-volumes-csi-<driver>` (the name
kube-scheduler gives the limit), so no planned node is given more than its limit.

A node karpy launches has no CSINode yet: its EBS CSI limit is what the driver will report, by the
formula of aws-ebs-csi-driver v1.30 `pkg/driver/node.go getVolumesLimit` and
`pkg/cloud/volume_limits.go`: a base of 28 attachments on Nitro types (39 on others), or a
dedicated limit for the types that have one (no ENI sharing), less the ENIs attached when the
driver starts and the NVMe instance-store volumes (Nitro shares the attachment slots with them), less
the root volume; at least 1. karpy assumes two ENIs attached at that point (the VPC CNI's primary ENI
and its default warm ENI), one more than the driver's worked example, so that a plan never counts
on a slot the node will not have.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

EBS_CSI_DRIVER = "ebs.csi.aws.com"
PREFIX = "attachable-volumes-csi-"
NITRO_BASE = 28
OTHER_BASE = 39
ENIS_AT_START = 2
ROOT_VOLUMES = 1
#: Always unlimited where no limit is known: a large count keeps the packer's arithmetic finite.
UNLIMITED = 1 << 20
#: Families with attachment slots of their own (aws-ebs-csi-driver v1.30 volume_limits.go).
DEDICATED_FAMILIES = frozenset({"m7i", "m7i-flex", "m7a", "c7i", "c7a", "r7a", "r7i", "r7iz", "u7i"})
DEDICATED_BY_SIZE = {
    "16xlarge": 48,
    "24xlarge": 64,
    "32xlarge": 88,
    "48xlarge": 128,
    "metal-16xl": 31,
    "metal-24xl": 31,
    "metal-32xl": 79,
    "metal-48xl": 79,
}
DEDICATED_DEFAULT = 32


def dimension(driver: str) -> str:
    return PREFIX + driver


def driver_of(dimension_name: str) -> str | None:
    return dimension_name[len(PREFIX) :] if dimension_name.startswith(PREFIX) else None


def ebs_limit(raw: Mapping[str, Any]) -> int:
    """The EBS CSI attach limit of a new node of a DescribeInstanceTypes entry."""
    family, _, size = str(raw.get("InstanceType", "")).partition(".")
    if family in DEDICATED_FAMILIES:
        return max(1, DEDICATED_BY_SIZE.get(size, DEDICATED_DEFAULT) - ROOT_VOLUMES)
    if raw.get("Hypervisor") != "nitro" and not raw.get("BareMetal"):
        return max(1, OTHER_BASE - ROOT_VOLUMES)
    storage = raw.get("InstanceStorageInfo") or {}
    nvme = sum(int(d.get("Count") or 0) for d in storage.get("Disks") or ()) if storage else 0
    return max(1, NITRO_BASE - ENIS_AT_START - nvme - ROOT_VOLUMES)
