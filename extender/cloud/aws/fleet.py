"""CreateFleet (Type=instant) for one LaunchRequest: overrides, the request, and its response.

`plan_overrides` and `fleet_request` are pure: they turn priced options into the call exactly as
issue 5 specifies (options x one subnet per allowed zone, cheapest first; spot priorities in price
order with capacity-optimized-prioritized; on-demand lowest-price). `parse_fleet_response` reads
both response shapes (AWS groups InstanceIds per override, moto returns one entry per instance)
and turns capacity errors into unavailable offerings. `create_fleet` makes the call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from extender.api.capacity_reservations import CAPACITY_BLOCK, CapacityReservation
from extender.api.labels import CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_SPOT
from extender.cloud.aws import errors
from extender.cloud.types import OfferingKey
from extender.scheduling.instancetypes import InstanceType

SPOT_STRATEGY = "capacity-optimized-prioritized"
ON_DEMAND_STRATEGY = "lowest-price"


@dataclass(frozen=True)
class Override:
    instance_type: str
    zone: str
    subnet_id: str
    launch_template: str
    price: float


@dataclass(frozen=True)
class FleetOutcome:
    instance_ids: tuple[str, ...]
    unavailable: tuple[OfferingKey, ...] = ()
    #: Unique "Code: message" strings of every fleet error, capacity errors included.
    errors: tuple[str, ...] = ()


def plan_overrides(
    options: Sequence[InstanceType],
    *,
    capacity_type: str,
    zones: Sequence[str],
    subnets: Mapping[str, str],
    templates: Mapping[str, str],
) -> list[Override]:
    """Every available offering of the options in an allowed zone with a subnet, cheapest first.

    Ties keep the caller's option order, then zone order, so equal inputs give equal requests.
    """
    ranked = []
    for rank, option in enumerate(options):
        for offering in option.offerings:
            if offering.capacity_type != capacity_type or not offering.available:
                continue
            if offering.zone not in zones or offering.zone not in subnets:
                continue
            override = Override(
                option.name, offering.zone, subnets[offering.zone], templates[option.name], offering.price
            )
            ranked.append(((offering.price, rank, offering.zone), override))
    return [override for _, override in sorted(ranked, key=lambda pair: pair[0])]


def target_capacity_type(capacity_type: str, reservation: CapacityReservation | None) -> str:
    """The fleet's DefaultTargetCapacityType: a reserved launch is on-demand into its reservation
    (or `capacity-block`), as Karpenter's CreateFleet for reserved capacity."""
    if reservation is None:
        return capacity_type
    return CAPACITY_BLOCK if reservation.is_block else CAPACITY_TYPE_ON_DEMAND


def fleet_request(
    overrides: Sequence[Override],
    *,
    capacity_type: str,
    count: int,
    tags: Mapping[str, str],
    client_token: str,
    target_capacity_type: str = "",
) -> dict[str, Any]:
    configs: dict[str, list[dict[str, Any]]] = {}
    for priority, override in enumerate(overrides):
        entry: dict[str, Any] = {
            "InstanceType": override.instance_type,
            "SubnetId": override.subnet_id,
            "AvailabilityZone": override.zone,
        }
        if capacity_type == CAPACITY_TYPE_SPOT:
            # Lower number = launched first; capacity-optimized-prioritized honours it on a best-effort basis.
            entry["Priority"] = float(priority)
        configs.setdefault(override.launch_template, []).append(entry)
    return {
        "Type": "instant",
        "ClientToken": client_token,
        "LaunchTemplateConfigs": [
            {
                "LaunchTemplateSpecification": {"LaunchTemplateName": name, "Version": "$Default"},
                "Overrides": items,
            }
            for name, items in configs.items()
        ],
        "TargetCapacitySpecification": {
            "TotalTargetCapacity": count,
            "DefaultTargetCapacityType": target_capacity_type or capacity_type,
        },
        "SpotOptions": {"AllocationStrategy": SPOT_STRATEGY},
        "OnDemandOptions": {"AllocationStrategy": ON_DEMAND_STRATEGY},
        "TagSpecifications": [
            {"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in sorted(tags.items())]}
        ],
    }


def parse_fleet_response(
    response: Mapping[str, Any], *, capacity_type: str, zones_by_subnet: Mapping[str, str]
) -> FleetOutcome:
    instance_ids: dict[str, None] = {}
    for entry in response.get("Instances", []):
        instance_ids.update(dict.fromkeys(entry.get("InstanceIds", [])))
    unavailable: dict[OfferingKey, None] = {}
    messages: dict[str, None] = {}
    for error in response.get("Errors", []):
        code = str(error.get("ErrorCode", ""))
        messages[f"{code}: {error.get('ErrorMessage', '')}"] = None
        override = error.get("LaunchTemplateAndOverrides", {}).get("Overrides", {})
        zone = override.get("AvailabilityZone") or zones_by_subnet.get(override.get("SubnetId", ""), "")
        if errors.is_unfulfillable(code) and override.get("InstanceType") and zone:
            key = OfferingKey(override["InstanceType"], zone, error.get("Lifecycle") or capacity_type)
            unavailable[key] = None
    return FleetOutcome(tuple(instance_ids), tuple(unavailable), tuple(messages))


def create_fleet(ec2: Any, request: Mapping[str, Any]) -> Mapping[str, Any]:
    with errors.translated("creating fleet"):
        return ec2.create_fleet(**request)
