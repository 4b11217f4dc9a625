"""Selector filters, security group choice and subnet-per-zone choice (pure)."""

from __future__ import annotations

from extender.cloud.aws.securitygroups import select_group_ids
from extender.cloud.aws.selectors import SelectorCache, tag_filters, to_filters
from extender.cloud.aws.subnets import one_per_zone


def test_wildcard_value_means_tag_key_and_commas_mean_any_of() -> None:
    assert to_filters(
        {"kubernetes.io/cluster/demo": "*", "Name": "private-a, private-b", "tier": "priv-*"}
    ) == [
        {"Name": "tag:Name", "Values": ["private-a", "private-b"]},
        {"Name": "tag-key", "Values": ["kubernetes.io/cluster/demo"]},
        {"Name": "tag:tier", "Values": ["priv-*"]},
    ]


def test_only_the_first_cluster_tagged_security_group_is_kept() -> None:
    cluster_tag = [{"Key": "kubernetes.io/cluster/demo", "Value": "owned"}]
    groups = [
        {"GroupId": "sg-3", "Tags": cluster_tag},
        {"GroupId": "sg-1", "Tags": []},
        {"GroupId": "sg-2", "Tags": cluster_tag},
    ]
    assert select_group_ids(groups, "demo") == ["sg-1", "sg-2"]


def test_one_subnet_per_zone_with_the_most_free_addresses() -> None:
    subnets = [
        {"SubnetId": "subnet-1", "AvailabilityZone": "a", "AvailableIpAddressCount": 10},
        {"SubnetId": "subnet-2", "AvailabilityZone": "a", "AvailableIpAddressCount": 200},
        {"SubnetId": "subnet-4", "AvailabilityZone": "b", "AvailableIpAddressCount": 5},
        {"SubnetId": "subnet-3", "AvailabilityZone": "b", "AvailableIpAddressCount": 5},
    ]
    assert {zone: s["SubnetId"] for zone, s in one_per_zone(subnets).items()} == {
        "a": "subnet-2",
        "b": "subnet-3",
    }


def test_selector_cache_fetches_once_per_ttl_per_selector() -> None:
    now = [0.0]
    fetched: list[list] = []
    cache = SelectorCache(
        lambda filters: fetched.append(filters) or [{"id": len(fetched)}], ttl=60, timer=lambda: now[0]
    )
    a, b = tag_filters({"a": "*"}), tag_filters({"b": "1"})
    assert cache.get(a) == [{"id": 1}]
    assert cache.get(tag_filters({"a": "*"})) == [{"id": 1}]
    assert cache.get(b) == [{"id": 2}]
    now[0] = 61
    assert cache.get(a) == [{"id": 3}]
