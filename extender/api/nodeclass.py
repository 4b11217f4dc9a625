"""The node configuration: how karpy's nodes boot (AMI, user data, disks, IMDS, network, tags).

One typed value behind both v1alpha5 forms, a Provisioner's inline `spec.provider` and the
`karpenter.k8s.aws/v1alpha1` AWSNodeTemplate its `spec.providerRef` names. Field names are
Karpenter's; v1's EC2NodeClass maps onto it field for field: amiFamily, amiSelectorTerms (here the
v1alpha5 `amiSelector` map), userData, blockDeviceMappings (+ rootVolume), metadataOptions,
subnet/securityGroup selector terms (a v1alpha5 map becomes tag terms), tags, instanceProfile,
detailedMonitoring, associatePublicIPAddress (v1 only), context; its `kubelet` block is the
Provisioner's `kubeletConfiguration` (extender.api.kubelet), where v1alpha5 keeps it.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from extender.api.capacity_reservations import ReservationSelector
from extender.api.labels import LAUNCH_ID_TAG

GIB = 2**30

AL2023, AL2, BOTTLEROCKET, UBUNTU, CUSTOM = "AL2023", "AL2", "Bottlerocket", "Ubuntu", "Custom"
AMI_FAMILIES = (AL2023, AL2, BOTTLEROCKET, UBUNTU, CUSTOM)
#: karpy's default: AWS publishes no AL2 EKS AMI for Kubernetes 1.33 and later (Karpenter v0.x
#: defaulted to AL2, v1 has no default).
DEFAULT_AMI_FAMILY = AL2023
#: Karpenter families karpy does not launch (its nodes are Linux).
UNSUPPORTED_AMI_FAMILIES = ("Windows2019", "Windows2022", "Windows2025")
#: The one `instanceStorePolicy` Karpenter defines.
RAID0 = "RAID0"

API_GROUP = "karpenter.k8s.aws"
API_VERSION = "karpenter.k8s.aws/v1alpha1"
KIND = "AWSNodeTemplate"
#: Node annotation: the AMI the node's instance was launched from (for drift).
AMI_ID_ANNOTATION = "karpenter.k8s.aws/instance-ami-id"

VOLUME_TYPES = ("standard", "io1", "io2", "gp2", "sc1", "st1", "gp3")

#: EC2's tag limits (User Guide, "Tag restrictions"): 50 tags a resource, keys of at most 128
#: characters, values of at most 256, and the `aws:` prefix reserved.
MAX_EC2_TAGS, MAX_TAG_KEY, MAX_TAG_VALUE = 50, 128, 256
#: The tags karpy puts on every instance besides the user's (extender/cloud/aws/provider.py
#: `instance_tags`; a launch template gets fewer: the cluster tag and the user's).
KARPY_INSTANCE_TAGS = (
    "Name",
    "kubernetes.io/cluster/<cluster>",
    "karpenter.sh/cluster/<cluster>",
    "<owner label>",
    LAUNCH_ID_TAG,
)
#: User tag keys that replace one of karpy's rather than add one.
KARPY_TAG_KEYS = ("Name", LAUNCH_ID_TAG)
MAX_USER_TAGS = MAX_EC2_TAGS - len(KARPY_INSTANCE_TAGS)


def tag_problem(key: str, value: str) -> str | None:
    """Why EC2 would refuse the tag `key=value` (and with it every launch), or None."""
    if len(key) > MAX_TAG_KEY:
        return f"key of {len(key)} characters, EC2 takes at most {MAX_TAG_KEY}"
    if key.lower().startswith("aws:"):
        return "the aws: prefix is reserved for AWS"
    if len(value) > MAX_TAG_VALUE:
        return f"value of {len(value)} characters, EC2 takes at most {MAX_TAG_VALUE}"
    return None


@dataclass(frozen=True)
class EBS:
    #: Bytes; None with a snapshotId (the snapshot's size).
    volume_size: float | None = None
    volume_type: str = ""
    iops: int | None = None
    throughput: int | None = None
    encrypted: bool | None = None
    kms_key_id: str = ""
    delete_on_termination: bool | None = None
    snapshot_id: str = ""


@dataclass(frozen=True)
class BlockDeviceMapping:
    device_name: str
    ebs: EBS = field(default_factory=EBS)
    #: v1's `rootVolume`: this is the volume kubelet's nodefs lives on.
    root_volume: bool = False


@dataclass(frozen=True)
class MetadataOptions:
    """IMDS settings; v1alpha5's defaults (IMDSv2 only, hop limit 2 so pods behind one NAT hop reach it)."""

    http_endpoint: str = "enabled"
    http_protocol_ipv6: str = "disabled"
    http_put_response_hop_limit: int = 2
    http_tokens: str = "required"


@dataclass(frozen=True)
class SelectorTerm:
    """One subnet or security-group selector term (Karpenter v1 `subnetSelectorTerms`): its tags
    ANDed ("*" = any value of that key), or one resource id, or one security-group name. A
    selector's terms are ORed."""

    tags: Mapping[str, str] = field(default_factory=dict)
    id: str = ""
    name: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The term as the manifest writes it (also how errors and logs show it)."""
        if self.id:
            return {"id": self.id}
        if self.name:
            return {"name": self.name}
        return {"tags": dict(self.tags)}


Selector = tuple[SelectorTerm, ...]


def split_tag_selector(selector: Mapping[str, str]) -> list[dict[str, str]]:
    """A v1alpha5 tag selector as v1 tag maps: its comma-separated values ("a,b" = a or b) become
    one map per combination, as v1 matches a value exactly and ORs terms."""
    keys = sorted(selector)
    choices = [[part.strip() for part in selector[key].split(",")] for key in keys]
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*choices)] if keys else []


def tag_terms(selector: Mapping[str, str]) -> Selector:
    """A v1alpha5 `subnetSelector` / `securityGroupSelector` map as selector terms."""
    return tuple(SelectorTerm(tags=tags) for tags in split_tag_selector(selector))


def show_terms(terms: Selector) -> list[dict[str, Any]]:
    return [term.as_dict() for term in terms]


@dataclass(frozen=True)
class ClusterRef:
    name: str
    endpoint: str = ""


def _ebs(size_gib: int) -> EBS:
    # Karpenter's DefaultEBS.
    return EBS(volume_size=size_gib * GIB, volume_type="gp3", encrypted=True)


#: Block devices a family's nodes get when the node configuration names none.
DEFAULT_BLOCK_DEVICES: Mapping[str, tuple[BlockDeviceMapping, ...]] = {
    AL2023: (BlockDeviceMapping("/dev/xvda", _ebs(20)),),
    AL2: (BlockDeviceMapping("/dev/xvda", _ebs(20)),),
    BOTTLEROCKET: (BlockDeviceMapping("/dev/xvda", _ebs(4)), BlockDeviceMapping("/dev/xvdb", _ebs(20))),
    UBUNTU: (BlockDeviceMapping("/dev/sda1", _ebs(20)),),
    CUSTOM: (),
}
#: The device kubelet's nodefs (ephemeral storage) lives on, per family.
EPHEMERAL_DEVICE = {AL2023: "/dev/xvda", AL2: "/dev/xvda", BOTTLEROCKET: "/dev/xvdb", UBUNTU: "/dev/sda1"}
DEFAULT_EPHEMERAL_BYTES = 20 * GIB


@dataclass(frozen=True)
class NodeClass:
    instance_profile: str = ""
    #: v1 EC2NodeClass `role`: Karpenter creates an instance profile for it; karpy does not manage
    #: IAM, so its nodes launch with the configured default instance profile, else the profile
    #: named as the role (`launch_profile`).
    role: str = ""
    #: An unmanaged launch template used as is (AMI, user data, disks are then its own).
    launch_template: str = ""
    #: Terms ORed; () = the cluster's default (resources tagged `kubernetes.io/cluster/<name>`).
    subnet_selector: Selector = ()
    security_group_selector: Selector = ()
    #: v1 `capacityReservationSelectorTerms` (ORed): the reservations its nodes may launch into
    #: as capacity type `reserved`; () = none (v1alpha5 has no such field).
    capacity_reservation_selector: ReservationSelector = ()
    tags: Mapping[str, str] = field(default_factory=dict)
    #: "" = DEFAULT_AMI_FAMILY (see `family`).
    ami_family: str = ""
    #: The version of a v1 alias (`al2023@v20240625`): the family's AMI of that release rather
    #: than its latest ("" = latest).
    ami_version: str = ""
    #: v1alpha5 `amiSelector`: tags, or `aws-ids` / `aws::ids`, `aws::name`, `aws::owners`.
    ami_selector: Mapping[str, str] = field(default_factory=dict)
    user_data: str | None = None
    block_device_mappings: tuple[BlockDeviceMapping, ...] = ()
    metadata_options: MetadataOptions = field(default_factory=MetadataOptions)
    detailed_monitoring: bool | None = None
    #: v1 EC2NodeClass `associatePublicIPAddress` (None = the subnet's MapPublicIpOnLaunch decides).
    associate_public_ip_address: bool | None = None
    #: "RAID0": the instance-store NVMe disks are striped and become kubelet's nodefs (Karpenter
    #: v0.34+ `instanceStorePolicy`); "" = left unmounted, nodefs on the root volume.
    instance_store_policy: str = ""
    context: str = ""
    cluster: ClusterRef | None = None

    def launch_profile(self, default: str) -> str:
        """The instance profile nodes launch with: this one's, else karpy's default, else the role's."""
        return self.instance_profile or default or self.role

    @property
    def family(self) -> str:
        return self.ami_family or DEFAULT_AMI_FAMILY

    def block_devices(self) -> tuple[BlockDeviceMapping, ...]:
        """The mappings the launch template carries: the user's, else the family's defaults."""
        return self.block_device_mappings or DEFAULT_BLOCK_DEVICES[self.family]

    def ephemeral_storage(self) -> float:
        """Bytes of the volume kubelet's nodefs lives on (Karpenter's `ephemeralStorage`, first match)."""
        mappings = self.block_device_mappings
        sized = [m for m in mappings if m.ebs.volume_size]
        for mapping in sized:
            if mapping.root_volume:
                return float(mapping.ebs.volume_size or 0)
        if self.family == CUSTOM:
            return (
                float(mappings[-1].ebs.volume_size or DEFAULT_EPHEMERAL_BYTES)
                if mappings
                else DEFAULT_EPHEMERAL_BYTES
            )
        device = EPHEMERAL_DEVICE[self.family]
        for mapping in sized:
            if mapping.device_name == device:
                return float(mapping.ebs.volume_size or 0)
        for mapping in DEFAULT_BLOCK_DEVICES[self.family]:
            if mapping.device_name == device and mapping.ebs.volume_size:
                return float(mapping.ebs.volume_size)
        return DEFAULT_EPHEMERAL_BYTES
