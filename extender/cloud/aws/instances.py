"""EC2 instances as cloud Instances: describe by id or by tags, parse provider ids, terminate.

Called by AWSCloudProvider. Instances are found by karpy's tags (cluster, launch id), never by a
local record, so a restarted controller sees everything its predecessor launched.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from botocore.exceptions import ClientError

from extender.api.labels import (
    CAPACITY_RESERVATION_ID,
    CAPACITY_RESERVATION_TYPE,
    CAPACITY_TYPE_ON_DEMAND,
    CAPACITY_TYPE_RESERVED,
    CAPACITY_TYPE_SPOT,
    RESERVATION_LABELS,
)
from extender.cloud.aws import errors
from extender.cloud.aws.selectors import tags_of
from extender.cloud.types import Instance, InstanceNotFoundError

#: States of an instance that still is (or will be) a node; shutting-down/terminated are gone.
LIVE_STATES = ("pending", "running", "stopping", "stopped")
#: Network interface types that are EFA devices (Karpenter AWS `instance/types.go` EFACount).
EFA_INTERFACE_TYPES = ("efa", "efa-only")


def provider_id(zone: str, instance_id: str) -> str:
    return f"aws:///{zone}/{instance_id}"


def parse_provider_id(value: str) -> str:
    """The instance id of `aws:///<zone>/<id>` (a bare `i-...` id is accepted too)."""
    if value.startswith("i-") and "/" not in value:
        return value
    parts = value.split("/")
    if not value.startswith("aws://") or len(parts) != 5 or not parts[4].startswith("i-"):
        raise InstanceNotFoundError(
            f"parsing provider id {value!r}: want aws:///<zone>/<instance-id>", code="InvalidProviderID"
        )
    return parts[4]


def to_instance(raw: Mapping[str, Any]) -> Instance:
    zone = raw.get("Placement", {}).get("AvailabilityZone", "")
    # EC2 omits InstanceLifecycle for on-demand instances.
    capacity_type = CAPACITY_TYPE_SPOT if raw.get("InstanceLifecycle") == "spot" else CAPACITY_TYPE_ON_DEMAND
    tags = tags_of(raw)
    # EC2 reports the reservation an instance runs in; moto does not, so karpy's launch tag stands in.
    reservation = str(raw.get("CapacityReservationId") or tags.get(CAPACITY_RESERVATION_ID, ""))
    reservation_labels: dict[str, str] = {}
    if reservation:
        capacity_type = CAPACITY_TYPE_RESERVED
        reservation_labels = {key: tags[key] for key in RESERVATION_LABELS if tags.get(key)}
        reservation_labels[CAPACITY_RESERVATION_ID] = reservation
        if raw.get("InstanceLifecycle") == "capacity-block":
            reservation_labels[CAPACITY_RESERVATION_TYPE] = "capacity-block"
    return Instance(
        id=raw["InstanceId"],
        instance_type=raw.get("InstanceType", ""),
        zone=zone,
        capacity_type=capacity_type,
        private_dns_name=raw.get("PrivateDnsName", ""),
        provider_id=provider_id(zone, raw["InstanceId"]),
        state=raw.get("State", {}).get("Name", ""),
        launch_time=raw.get("LaunchTime"),
        tags=tags,
        image_id=raw.get("ImageId", ""),
        efa_interfaces=sum(
            1 for eni in raw.get("NetworkInterfaces") or () if eni.get("InterfaceType") in EFA_INTERFACE_TYPES
        ),
        capacity_reservation_id=reservation,
        reservation_labels=reservation_labels,
    )


def _describe(ec2: Any, doing: str, **kwargs: Any) -> list[Instance]:
    with errors.translated(doing):
        pages = ec2.get_paginator("describe_instances").paginate(**kwargs)
        return [
            to_instance(raw) for page in pages for r in page.get("Reservations", []) for raw in r["Instances"]
        ]


def describe(ec2: Any, instance_ids: Sequence[str]) -> list[Instance]:
    return _describe(ec2, f"describing instances {list(instance_ids)}", InstanceIds=list(instance_ids))


def find_by_tags(ec2: Any, tags: Mapping[str, str]) -> list[Instance]:
    """Live instances carrying every tag in `tags`."""
    filters = [{"Name": f"tag:{key}", "Values": [value]} for key, value in sorted(tags.items())]
    filters.append({"Name": "instance-state-name", "Values": list(LIVE_STATES)})
    return _describe(ec2, f"listing instances tagged {dict(tags)}", Filters=filters)


def terminate(ec2: Any, instance_id: str) -> None:
    """Terminate; an instance EC2 no longer knows is already gone, which is what was asked."""
    with errors.translated(f"terminating instance {instance_id}"):
        try:
            ec2.terminate_instances(InstanceIds=[instance_id])
        except ClientError as err:
            if not errors.is_not_found(err):
                raise
