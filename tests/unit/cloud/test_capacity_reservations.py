"""The capacity reservation client's requests and its declared-file fallback.

The requests are checked with botocore's Stubber: a check of the request shape karpy sends
(Karpenter AWS v1.14.1 `pkg/providers/capacityreservation/types.go`
DescribeCapacityReservationsInput), not a claim about EC2's behaviour, which moto cannot serve
(tests/integration/test_capacity_reservations.py runs the fallback on moto and the control plane).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber

from extender.api.capacity_reservations import ReservationTerm
from extender.cloud.aws import capacityreservations as crs
from extender.cloud.types import CloudError

ITEM = {
    "CapacityReservationId": "cr-0123456789abcdef0",
    "OwnerId": "012345678901",
    "InstanceType": "m5.large",
    "AvailabilityZone": "us-west-2a",
    "TotalInstanceCount": 4,
    "AvailableInstanceCount": 3,
    "InstanceMatchCriteria": "targeted",
    "State": "active",
    "ReservationType": "capacity-block",
    "EndDate": datetime(2026, 12, 24, tzinfo=UTC),
    "Tags": [{"Key": "team", "Value": "ml"}],
}


def ec2() -> object:
    return boto3.client("ec2", region_name="us-west-2", aws_access_key_id="x", aws_secret_access_key="x")


def test_each_term_is_one_request_as_karpenter_builds_it() -> None:
    terms = [
        ReservationTerm(id="cr-0123456789abcdef0"),
        ReservationTerm(
            tags={"team": "ml", "env": "*"}, owner_id="012345678901", instance_match_criteria="open"
        ),
    ]
    assert crs.queries(terms) == [
        # An id: no MaxResults (EC2 refuses it with ids).
        {
            "Filters": [{"Name": "state", "Values": ["active"]}],
            "CapacityReservationIds": ["cr-0123456789abcdef0"],
        },
        {
            "Filters": [
                {"Name": "state", "Values": ["active"]},
                {"Name": "owner-id", "Values": ["012345678901"]},
                {"Name": "tag-key", "Values": ["env"]},
                {"Name": "tag:team", "Values": ["ml"]},
                {"Name": "instance-match-criteria", "Values": ["open"]},
            ],
            "MaxResults": 1000,
        },
    ]


def test_the_api_answer_is_read_and_cached_for_a_minute() -> None:
    client = ec2()
    now = [100.0]
    provider = crs.CapacityReservationProvider(
        client, timer=lambda: now[0], now=lambda: datetime(2026, 12, 1, tzinfo=UTC)
    )
    terms = [ReservationTerm(tags={"team": "ml"})]
    with Stubber(client) as stub:
        stub.add_response(
            "describe_capacity_reservations", {"CapacityReservations": [ITEM]}, crs.queries(terms)[0]
        )
        (found,) = provider.find(terms)
        assert provider.find(terms) == [found]  # the second is served from the cache: no request
        stub.assert_no_pending_responses()
    assert (found.id, found.available, found.total, found.reservation_type) == (
        "cr-0123456789abcdef0",
        3,
        4,
        "capacity-block",
    )
    assert provider.source == crs.API_SOURCE
    provider.mark_launched(found.id, 2)
    assert provider.find(terms)[0].available == 1
    now[0] += crs.CACHE_TTL_SECONDS
    with Stubber(client) as stub:
        stub.add_response(
            "describe_capacity_reservations", {"CapacityReservations": [ITEM]}, crs.queries(terms)[0]
        )
        assert provider.find(terms)[0].available == 3  # EC2's count again after the next answer


def test_an_api_error_is_raised_when_no_file_is_declared() -> None:
    client = ec2()
    provider = crs.CapacityReservationProvider(client)
    with Stubber(client) as stub:
        stub.add_client_error("describe_capacity_reservations", "UnauthorizedOperation", "no", 403)
        with pytest.raises(CloudError, match="UnauthorizedOperation"):
            provider.find([ReservationTerm(tags={"a": "b"})])


def declared(tmp_path: Path, items: object) -> str:
    path = tmp_path / "reservations.json"
    path.write_text(json.dumps(items))
    return str(path)


def test_the_declared_file_answers_where_the_api_is_not_implemented(tmp_path: Path) -> None:
    client = ec2()
    path = declared(
        tmp_path,
        [
            {
                "id": "cr-a",
                "instanceType": "m5.large",
                "availabilityZone": "us-west-2a",
                "totalInstanceCount": 2,
                "tags": {"team": "ml"},
            },
            {
                "id": "cr-b",
                "instanceType": "m5.large",
                "availabilityZone": "us-west-2b",
                "totalInstanceCount": 1,
                "tags": {"team": "web"},
            },
        ],
    )
    provider = crs.CapacityReservationProvider(client, declared=path)
    with Stubber(client) as stub:
        stub.add_client_error("describe_capacity_reservations", "InvalidAction", "not implemented", 400)
        stub.add_response("describe_instances", {"Reservations": []})
        found = provider.find([ReservationTerm(tags={"team": "ml"})])
    assert [(r.id, r.available) for r in found] == [("cr-a", 2)]
    assert provider.source == f"declared file {path}"


def test_a_bad_declared_file_names_every_bad_field(tmp_path: Path) -> None:
    path = declared(
        tmp_path,
        [
            {
                "id": "cr-a",
                "instanceType": "m5.large",
                "totalInstanceCount": -1,
                "endDate": "soon",
                "reservationType": "x",
                "zone": "a",
            }
        ],
    )
    with pytest.raises(CloudError) as err:
        crs.load_declared(path)
    for part in (
        "[0].zone: unknown field",
        "[0].availabilityZone: missing required field",
        "[0].totalInstanceCount: -1 is not a non-negative integer",
        "[0].endDate: 'soon' is not an RFC 3339 time",
        "[0].reservationType: 'x' not in ['default', 'capacity-block']",
    ):
        assert part in str(err.value)


def test_other_errors_are_not_mistaken_for_not_implemented() -> None:
    err = ClientError(
        {"Error": {"Code": "RequestLimitExceeded", "Message": "slow down"}}, "DescribeCapacityReservations"
    )
    assert not crs._not_implemented(err)
    assert crs._not_implemented(
        ClientError({"Error": {"Code": "InvalidAction"}}, "DescribeCapacityReservations")
    )
