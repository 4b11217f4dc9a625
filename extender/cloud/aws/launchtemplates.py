"""Launch templates: one per distinct (AMI, security groups, instance profile, user data, tags, block
devices, metadata options, monitoring, EFA interfaces). User data carries the node's maxPods, so
types of one AMI with different maxPods get different templates, as Karpenter groups them.

The name carries a hash of those inputs (`karpy-<cluster>-<hash>`), so equal inputs always map to
the same template and a changed input makes a new one; nothing is ever updated in place. Templates
are looked up, created if missing (a concurrent creator's AlreadyExists is fine) and remembered
for 60 s. Called by AWSCloudProvider.create once per distinct AMI in a launch.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from botocore.exceptions import ClientError
from cachetools import TTLCache

from extender.api.nodeclass import BlockDeviceMapping, MetadataOptions
from extender.cloud.aws import errors
from extender.cloud.aws.selectors import CACHE_TTL_SECONDS

GIB = 2**30


def block_device_mapping(mapping: BlockDeviceMapping) -> dict[str, Any]:
    """One EC2 BlockDeviceMapping; sizes are whole GiB (EC2's unit), rounded up."""
    ebs = mapping.ebs
    fields: dict[str, Any] = {
        "VolumeSize": math.ceil(ebs.volume_size / GIB) if ebs.volume_size else None,
        "VolumeType": ebs.volume_type or None,
        "Iops": ebs.iops,
        "Throughput": ebs.throughput,
        "Encrypted": ebs.encrypted,
        "KmsKeyId": ebs.kms_key_id or None,
        "DeleteOnTermination": ebs.delete_on_termination,
        "SnapshotId": ebs.snapshot_id or None,
    }
    return {"DeviceName": mapping.device_name, "Ebs": {k: v for k, v in fields.items() if v is not None}}


def metadata_options(options: MetadataOptions) -> dict[str, Any]:
    return {
        "HttpEndpoint": options.http_endpoint,
        "HttpProtocolIpv6": options.http_protocol_ipv6,
        "HttpPutResponseHopLimit": options.http_put_response_hop_limit,
        "HttpTokens": options.http_tokens,
    }


def efa_network_interfaces(count: int, security_group_ids: Sequence[str]) -> list[dict[str, Any]]:
    """`count` EFA interfaces, one per network card, as Karpenter AWS builds them
    (`launchtemplate.go` generateNetworkInterfaces): card i, device index 0 on card 0 (the primary
    interface, which gets the fleet override's subnet) and 1 on the others, type `efa`, the node's
    security groups."""
    return [
        {
            "NetworkCardIndex": index,
            "DeviceIndex": 0 if index == 0 else 1,
            "InterfaceType": "efa",
            "Groups": list(security_group_ids),
        }
        for index in range(count)
    ]


@dataclass(frozen=True)
class ReservationTarget:
    """A launch template's CapacityReservationSpecification: into reservation `id` only
    (capacity-reservations-only, a capacity block's market type), or, with no id, into none."""

    id: str
    capacity_block: bool = False

    def template_data(self) -> dict[str, Any]:
        if not self.id:
            return {"CapacityReservationSpecification": {"CapacityReservationPreference": "none"}}
        data: dict[str, Any] = {
            "CapacityReservationSpecification": {
                "CapacityReservationPreference": "capacity-reservations-only",
                "CapacityReservationTarget": {"CapacityReservationId": self.id},
            }
        }
        if self.capacity_block:
            data["InstanceMarketOptions"] = {"MarketType": "capacity-block"}
        return data


@dataclass(frozen=True)
class LaunchTemplateSpec:
    image_id: str
    security_group_ids: tuple[str, ...]
    instance_profile: str
    user_data: str
    tags: tuple[tuple[str, str], ...]
    block_device_mappings: tuple[BlockDeviceMapping, ...] = ()
    metadata_options: MetadataOptions = field(default_factory=MetadataOptions)
    detailed_monitoring: bool | None = None
    #: EFA interfaces the node is launched with (0 = the default primary interface only).
    efa_interfaces: int = 0
    #: EC2NodeClass `associatePublicIPAddress` (None = the subnet decides).
    associate_public_ip_address: bool | None = None
    #: Capacity reservations (None = EC2's default: open reservations may be used).
    reservation: ReservationTarget | None = None

    @classmethod
    def of(
        cls,
        *,
        image_id: str,
        security_group_ids: Sequence[str],
        instance_profile: str,
        user_data: str,
        tags: Mapping[str, str],
        block_device_mappings: Sequence[BlockDeviceMapping] = (),
        metadata_options: MetadataOptions | None = None,
        detailed_monitoring: bool | None = None,
        efa_interfaces: int = 0,
        associate_public_ip_address: bool | None = None,
        reservation: ReservationTarget | None = None,
    ) -> LaunchTemplateSpec:
        return cls(
            image_id,
            tuple(sorted(security_group_ids)),
            instance_profile,
            user_data,
            tuple(sorted(tags.items())),
            tuple(block_device_mappings),
            metadata_options or MetadataOptions(),
            detailed_monitoring,
            efa_interfaces,
            associate_public_ip_address,
            reservation,
        )

    def name(self, cluster: str) -> str:
        fields = asdict(self)
        if not self.efa_interfaces:
            del fields["efa_interfaces"]  # the names templates without EFA had before the field existed
        if fields["associate_public_ip_address"] is None:
            # Unset, it leaves the name as it was before the field existed: no template is made again.
            del fields["associate_public_ip_address"]
        if fields["reservation"] is None:
            del fields["reservation"]  # likewise
        digest = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()
        return f"karpy-{cluster}-{digest[:16]}"

    def network_interfaces(self) -> list[dict[str, Any]] | None:
        """The interfaces the template names, as Karpenter's generateNetworkInterfaces (AWS@v1.0
        pkg/providers/launchtemplate/launchtemplate.go): the EFA interfaces, or else the primary one
        when `associatePublicIPAddress` is set, each with the setting; None: the instance's default
        interface."""
        if self.efa_interfaces:
            interfaces = efa_network_interfaces(self.efa_interfaces, self.security_group_ids)
        elif self.associate_public_ip_address is not None:
            interfaces = [{"DeviceIndex": 0, "Groups": list(self.security_group_ids)}]
        else:
            return None
        if self.associate_public_ip_address is not None:
            for interface in interfaces:
                interface["AssociatePublicIpAddress"] = self.associate_public_ip_address
        return interfaces

    def template_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "ImageId": self.image_id,
            "UserData": base64.b64encode(self.user_data.encode()).decode(),
            "MetadataOptions": metadata_options(self.metadata_options),
        }
        if (interfaces := self.network_interfaces()) is not None:
            # EC2 takes security groups on the interfaces or on the instance, never both.
            data["NetworkInterfaces"] = interfaces
        else:
            data["SecurityGroupIds"] = list(self.security_group_ids)
        if self.block_device_mappings:
            data["BlockDeviceMappings"] = [block_device_mapping(m) for m in self.block_device_mappings]
        if self.instance_profile:
            data["IamInstanceProfile"] = {"Name": self.instance_profile}
        if self.detailed_monitoring is not None:
            data["Monitoring"] = {"Enabled": self.detailed_monitoring}
        if self.reservation is not None:
            data.update(self.reservation.template_data())
        return data


class LaunchTemplateProvider:
    def __init__(self, ec2: Any, *, cluster: str, timer: Callable[[], float] = time.monotonic) -> None:
        self._ec2 = ec2
        self._cluster = cluster
        self._known: TTLCache[str, bool] = TTLCache(maxsize=256, ttl=CACHE_TTL_SECONDS, timer=timer)
        self._lock = threading.Lock()

    def ensure(self, spec: LaunchTemplateSpec) -> str:
        """The name of a launch template for `spec`, creating it if EC2 does not have it."""
        name = spec.name(self._cluster)
        with self._lock:
            if name not in self._known:
                if not self._exists(name):
                    self._create(name, spec)
                self._known[name] = True
        return name

    def _exists(self, name: str) -> bool:
        with errors.translated(f"describing launch template {name}"):
            try:
                self._ec2.describe_launch_templates(LaunchTemplateNames=[name])
            except ClientError as err:
                if errors.is_not_found(err):
                    return False
                raise
        return True

    def _create(self, name: str, spec: LaunchTemplateSpec) -> None:
        tags = [{"Key": key, "Value": value} for key, value in spec.tags]
        with errors.translated(f"creating launch template {name}"):
            try:
                self._ec2.create_launch_template(
                    LaunchTemplateName=name,
                    LaunchTemplateData=spec.template_data(),
                    TagSpecifications=[{"ResourceType": "launch-template", "Tags": tags}] if tags else [],
                )
            except ClientError as err:
                # Another controller replica (or a restart racing its predecessor) created it first.
                if not errors.is_already_exists(err):
                    raise
