"""Instances by tag, get by provider id, and terminate (twice) against moto."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from extender.cloud.aws.provider import AWSCloudProvider
from extender.cloud.types import InstanceNotFoundError, LaunchRequest

pytestmark = pytest.mark.integration


def test_list_finds_karpy_instances_by_cluster_tag_only(
    provider: AWSCloudProvider, launch: Callable[..., LaunchRequest], aws: Any, terminate_after: list[str]
) -> None:
    ours = provider.create(launch(["t3.small"], count=2)).instances
    terminate_after.extend(i.id for i in ours)
    # Same VPC and the kubernetes.io cluster tag, but not launched by karpy (a managed node group, say).
    foreign = aws.client("ec2").run_instances(
        ImageId=aws.amis["amd64"],
        InstanceType="t3.small",
        MinCount=1,
        MaxCount=1,
        SubnetId=aws.subnets["us-west-2a"],
        TagSpecifications=[
            {"ResourceType": "instance", "Tags": [{"Key": "kubernetes.io/cluster/karpy", "Value": "owned"}]}
        ],
    )["Instances"][0]["InstanceId"]
    terminate_after.append(foreign)

    listed = {i.id for i in provider.list()}
    assert {i.id for i in ours} <= listed
    assert foreign not in listed


def test_get_by_provider_id_and_terminate_twice(
    provider: AWSCloudProvider, launch: Callable[..., LaunchRequest]
) -> None:
    [instance] = provider.create(launch(["t3.medium"])).instances
    assert provider.get(instance.provider_id).id == instance.id

    provider.delete(instance.id)
    provider.delete(instance.provider_id)  # already terminating: not an error

    assert provider.get(instance.provider_id).state in ("shutting-down", "terminated")
    assert instance.id not in {i.id for i in provider.list()}
    assert provider.find_launch(instance.tags["karpy.sh/launch-id"]) == []


def test_terminating_an_instance_ec2_does_not_know_is_done(provider: AWSCloudProvider) -> None:
    provider.delete("aws:///us-west-2a/i-0123456789abcdef0")


@pytest.mark.parametrize("bad", ["aws:///us-west-2a/", "gce://project/zone/vm", "i-zz/"])
def test_malformed_ids_are_not_found(provider: AWSCloudProvider, bad: str) -> None:
    with pytest.raises(InstanceNotFoundError):
        provider.get(bad)
    with pytest.raises(InstanceNotFoundError):
        provider.delete(bad)


def test_get_of_an_unknown_instance_raises_not_found(provider: AWSCloudProvider) -> None:
    with pytest.raises(InstanceNotFoundError) as raised:
        provider.get("aws:///us-west-2a/i-0123456789abcdef0")
    assert raised.value.code == "InvalidInstanceID.NotFound"
