"""CreateFleet request building and response parsing (pure: plain data in, plain data out)."""

from __future__ import annotations

from extender.cloud.aws import fleet
from extender.cloud.types import OfferingKey
from extender.scheduling.instancetypes import InstanceType, Offering

ZONES = ["us-west-2a", "us-west-2b"]
SUBNETS = {"us-west-2a": "subnet-a", "us-west-2b": "subnet-b"}


def make_type(name: str, offerings: list[Offering], arch: str = "amd64") -> InstanceType:
    return InstanceType.build(name=name, cpu=2, memory=8 * 2**30, arch=arch, max_pods=29, offerings=offerings)


OPTIONS = [
    make_type(
        "m5.large",
        [
            Offering("us-west-2a", "spot", 0.040),
            Offering("us-west-2b", "spot", 0.030),
            Offering("us-west-2c", "spot", 0.010),  # no subnet there
            Offering("us-west-2a", "on-demand", 0.096),
        ],
    ),
    make_type(
        "m6g.large",
        [
            Offering("us-west-2a", "spot", 0.035),
            Offering("us-west-2b", "spot", 0.030, available=False),
            Offering("us-west-2a", "on-demand", 0.077),
        ],
        arch="arm64",
    ),
]
TEMPLATES = {"m5.large": "lt-amd64", "m6g.large": "lt-arm64"}


def test_overrides_are_available_offerings_in_allowed_zones_with_subnets_cheapest_first() -> None:
    overrides = fleet.plan_overrides(
        OPTIONS, capacity_type="spot", zones=ZONES, subnets=SUBNETS, templates=TEMPLATES
    )
    assert [(o.instance_type, o.zone, o.subnet_id, o.price) for o in overrides] == [
        ("m5.large", "us-west-2b", "subnet-b", 0.030),
        ("m6g.large", "us-west-2a", "subnet-a", 0.035),
        ("m5.large", "us-west-2a", "subnet-a", 0.040),
    ]


def test_equal_prices_keep_option_then_zone_order() -> None:
    options = [
        make_type(
            "c5.large",
            [Offering("us-west-2b", "on-demand", 0.085), Offering("us-west-2a", "on-demand", 0.085)],
        ),
        make_type("c6i.large", [Offering("us-west-2a", "on-demand", 0.085)]),
    ]
    overrides = fleet.plan_overrides(
        options,
        capacity_type="on-demand",
        zones=ZONES,
        subnets=SUBNETS,
        templates={"c5.large": "t", "c6i.large": "t"},
    )
    assert [(o.instance_type, o.zone) for o in overrides] == [
        ("c5.large", "us-west-2a"),
        ("c5.large", "us-west-2b"),
        ("c6i.large", "us-west-2a"),
    ]


def test_spot_request_uses_prioritized_strategy_with_priorities_in_price_order() -> None:
    overrides = fleet.plan_overrides(
        OPTIONS, capacity_type="spot", zones=ZONES, subnets=SUBNETS, templates=TEMPLATES
    )
    request = fleet.fleet_request(
        overrides, capacity_type="spot", count=3, tags={"b": "2", "a": "1"}, client_token="launch-1"
    )
    assert request["Type"] == "instant"
    assert request["ClientToken"] == "launch-1"
    assert request["TargetCapacitySpecification"] == {
        "TotalTargetCapacity": 3,
        "DefaultTargetCapacityType": "spot",
    }
    assert request["SpotOptions"] == {"AllocationStrategy": "capacity-optimized-prioritized"}
    # One config per launch template, in the order of each template's cheapest override.
    configs = request["LaunchTemplateConfigs"]
    assert [c["LaunchTemplateSpecification"]["LaunchTemplateName"] for c in configs] == [
        "lt-amd64",
        "lt-arm64",
    ]
    assert configs[0]["Overrides"] == [
        {
            "InstanceType": "m5.large",
            "SubnetId": "subnet-b",
            "AvailabilityZone": "us-west-2b",
            "Priority": 0.0,
        },
        {
            "InstanceType": "m5.large",
            "SubnetId": "subnet-a",
            "AvailabilityZone": "us-west-2a",
            "Priority": 2.0,
        },
    ]
    assert configs[1]["Overrides"][0]["Priority"] == 1.0
    assert request["TagSpecifications"] == [
        {"ResourceType": "instance", "Tags": [{"Key": "a", "Value": "1"}, {"Key": "b", "Value": "2"}]}
    ]


def test_on_demand_request_is_lowest_price_without_priorities() -> None:
    overrides = fleet.plan_overrides(
        OPTIONS, capacity_type="on-demand", zones=ZONES, subnets=SUBNETS, templates=TEMPLATES
    )
    request = fleet.fleet_request(overrides, capacity_type="on-demand", count=1, tags={}, client_token="t")
    assert request["OnDemandOptions"] == {"AllocationStrategy": "lowest-price"}
    assert [o["InstanceType"] for c in request["LaunchTemplateConfigs"] for o in c["Overrides"]] == [
        "m6g.large",
        "m5.large",
    ]
    assert all("Priority" not in o for c in request["LaunchTemplateConfigs"] for o in c["Overrides"])


def _entry(instance_type: str, subnet: str, ids: list[str]) -> dict:
    return {
        "LaunchTemplateAndOverrides": {"Overrides": {"InstanceType": instance_type, "SubnetId": subnet}},
        "Lifecycle": "spot",
        "InstanceIds": ids,
        "InstanceType": instance_type,
    }


def test_parse_reads_aws_grouped_and_moto_per_instance_shapes_alike() -> None:
    grouped = {"Instances": [_entry("m5.large", "subnet-a", ["i-1", "i-2", "i-3"])]}
    per_instance = {"Instances": [_entry("m5.large", "subnet-a", [i]) for i in ("i-1", "i-2", "i-3")]}
    for response in (grouped, per_instance):
        outcome = fleet.parse_fleet_response(
            response, capacity_type="spot", zones_by_subnet={"subnet-a": "us-west-2a"}
        )
        assert outcome == fleet.FleetOutcome(("i-1", "i-2", "i-3"))


def test_parse_turns_capacity_errors_into_unavailable_offerings_and_keeps_other_errors() -> None:
    response = {
        "Instances": [],
        "Errors": [
            {
                "LaunchTemplateAndOverrides": {
                    "Overrides": {"InstanceType": "m5.large", "SubnetId": "subnet-b"}
                },
                "Lifecycle": "on-demand",
                "ErrorCode": "InsufficientInstanceCapacity",
                "ErrorMessage": "none left",
            },
            {
                "LaunchTemplateAndOverrides": {
                    "Overrides": {"InstanceType": "m5.large", "SubnetId": "subnet-b"}
                },
                "ErrorCode": "InsufficientInstanceCapacity",
                "ErrorMessage": "none left",
            },
            {
                "LaunchTemplateAndOverrides": {
                    "Overrides": {"InstanceType": "c5.large", "AvailabilityZone": "us-west-2a"}
                },
                "ErrorCode": "UnfulfillableCapacity",
                "ErrorMessage": "no",
            },
            {"ErrorCode": "InvalidParameterValue", "ErrorMessage": "bad"},
        ],
    }
    outcome = fleet.parse_fleet_response(
        response, capacity_type="spot", zones_by_subnet={"subnet-b": "us-west-2b"}
    )
    assert outcome.instance_ids == ()
    assert outcome.unavailable == (
        OfferingKey("m5.large", "us-west-2b", "on-demand"),
        OfferingKey("m5.large", "us-west-2b", "spot"),
        OfferingKey("c5.large", "us-west-2a", "spot"),
    )
    assert outcome.errors == (
        "InsufficientInstanceCapacity: none left",
        "UnfulfillableCapacity: no",
        "InvalidParameterValue: bad",
    )
