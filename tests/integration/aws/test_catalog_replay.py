"""The kill -9 test's catalog replay (tests/integration/catalog_replay.py) against moto: EC2's two
catalog reads come back as moto sent them, fetched from moto once; every other call reaches moto."""

from __future__ import annotations

from typing import Any

import pytest

from hack.localcluster.awsseed import AwsSeed, aws_client
from tests.integration.catalog_replay import REPLAYED, catalog_replay

pytestmark = pytest.mark.integration


def _catalog(ec2: Any) -> tuple[Any, Any]:
    """Both reads for two types (the whole DescribeInstanceTypes is 5.8 MB of moto's time)."""
    types = ec2.describe_instance_types(InstanceTypes=["m5.large", "c5.xlarge"])["InstanceTypes"]
    offerings = ec2.describe_instance_type_offerings(
        LocationType="availability-zone", Filters=[{"Name": "instance-type", "Values": ["m5.large"]}]
    )["InstanceTypeOfferings"]
    assert len(types) == 2 and offerings
    return types, offerings


def test_catalog_reads_are_moto_s_answer_and_the_rest_is_forwarded(aws: AwsSeed) -> None:
    direct = aws.client("ec2")
    with catalog_replay(aws.endpoint_url) as proxy:
        through = aws_client("ec2", proxy.url, aws.region)
        first = _catalog(through)
        fetched = dict(proxy.decide.answers)  # type: ignore[attr-defined]
        second = _catalog(through)
        assert first == second == _catalog(direct)
        assert proxy.counts[REPLAYED] == 4, proxy.counts  # two reads, each twice
        assert proxy.decide.answers == fetched, "fetched from moto again"  # type: ignore[attr-defined]
        # A write and a read that change go to moto: the instance is there, seen both ways.
        vpc = direct.describe_vpcs()["Vpcs"][0]["VpcId"]
        made = through.create_security_group(GroupName="replay-check", Description="x", VpcId=vpc)
        try:
            groups = direct.describe_security_groups(GroupIds=[made["GroupId"]])["SecurityGroups"]
            assert [g["GroupName"] for g in groups] == ["replay-check"]
            assert through.describe_security_groups(GroupIds=[made["GroupId"]])["SecurityGroups"] == groups
        finally:
            direct.delete_security_group(GroupId=made["GroupId"])
        assert proxy.counts[REPLAYED] == 4
