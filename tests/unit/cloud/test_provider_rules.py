"""Provider rules that need no EC2: capacity type choice, unavailable offerings, ids, instances, errors."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from botocore.exceptions import ClientError

from extender.cloud.aws import errors, instances
from extender.cloud.aws.provider import choose_capacity_type, without_unavailable
from extender.cloud.types import CloudError, InstanceNotFoundError, InsufficientCapacityError, OfferingKey
from extender.scheduling.instancetypes import InstanceType, Offering

M5 = InstanceType.build(
    name="m5.large",
    cpu=2,
    memory=8 * 2**30,
    arch="amd64",
    max_pods=29,
    offerings=[
        Offering("a", "spot", 0.03),
        Offering("b", "spot", 0.03, available=False),
        Offering("a", "on-demand", 0.09),
    ],
)


def test_spot_when_allowed_and_offered_in_an_allowed_zone() -> None:
    assert choose_capacity_type([M5], ["spot", "on-demand"], ["a"]) == "spot"


def test_on_demand_when_spot_is_only_unavailable_or_elsewhere() -> None:
    assert choose_capacity_type([M5], ["spot", "on-demand"], ["b"]) == "on-demand"
    assert choose_capacity_type([M5], ["on-demand"], ["a"]) == "on-demand"
    assert choose_capacity_type([M5], [], ["a"]) == "on-demand"


def test_spot_only_requests_stay_spot_even_without_offerings() -> None:
    assert choose_capacity_type([M5], ["spot"], ["b"]) == "spot"


def test_unavailable_offerings_are_marked_not_dropped() -> None:
    catalog = [M5]
    assert without_unavailable(catalog, []) is catalog
    [marked] = without_unavailable(
        catalog, [OfferingKey("m5.large", "a", "spot"), OfferingKey("c5.large", "a", "spot")]
    )
    assert [(o.zone, o.capacity_type, o.available) for o in marked.offerings] == [
        ("a", "spot", False),
        ("b", "spot", False),
        ("a", "on-demand", True),
    ]


def test_provider_ids_round_trip() -> None:
    assert instances.parse_provider_id(instances.provider_id("us-west-2a", "i-0abc")) == "i-0abc"
    assert instances.parse_provider_id("i-0abc") == "i-0abc"
    with pytest.raises(InstanceNotFoundError):
        instances.parse_provider_id("aws:///us-west-2a")


def test_instances_read_spot_from_lifecycle_and_tags_as_a_map() -> None:
    raw = {
        "InstanceId": "i-1",
        "InstanceType": "m5.large",
        "Placement": {"AvailabilityZone": "us-west-2b"},
        "PrivateDnsName": "ip-10-0-0-1.ec2.internal",
        "State": {"Name": "running"},
        "LaunchTime": datetime(2026, 12, 2, tzinfo=UTC),
        "InstanceLifecycle": "spot",
        "Tags": [{"Key": "Name", "Value": "n"}],
    }
    instance = instances.to_instance(raw)
    assert (instance.capacity_type, instance.provider_id, instance.tags) == (
        "spot",
        "aws:///us-west-2b/i-1",
        {"Name": "n"},
    )
    del raw["InstanceLifecycle"]
    assert instances.to_instance(raw).capacity_type == "on-demand"


def client_error(code: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "m"}}, "Op")


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        ("InvalidInstanceID.NotFound", InstanceNotFoundError),
        ("InvalidInstanceID.Malformed", InstanceNotFoundError),
        ("InsufficientInstanceCapacity", InsufficientCapacityError),
        ("RequestLimitExceeded", CloudError),
    ],
)
def test_ec2_codes_map_to_domain_errors_naming_the_step(code: str, kind: type) -> None:
    with pytest.raises(kind) as raised, errors.translated("doing a thing"):
        raise client_error(code)
    assert type(raised.value) is kind
    assert raised.value.code == code
    assert str(raised.value).startswith("doing a thing, ")
