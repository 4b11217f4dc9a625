"""EC2NodeClass subnet and security-group selector terms against moto (server mode): terms are
ORed, a term's tags ANDed, "*" any value, an `id` term one resource, a security-group `name` term
its group name. Ported from aws/karpenter-provider-aws v1.14.1 pkg/providers/subnet/subnet.go and
securitygroup/securitygroup.go (`getFilterSets`: one Describe call per tag term, one for every id,
one for every name) and its suite tests "should discover subnets by ID/by tags/by multiple terms"
(pkg/providers/subnet/suite_test.go, securitygroup/suite_test.go)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from extender.api.ec2nodeclass import load_ec2nodeclass
from extender.api.nodeclass import SelectorTerm
from extender.cloud.aws.provider import AWSCloudProvider
from extender.cloud.aws.session import Clients
from extender.cloud.types import CloudError

pytestmark = pytest.mark.integration

RUN = uuid.uuid4().hex[:6]
TEAM, TIER = f"team-{RUN}", f"tier-{RUN}"


def _tags(tags: dict[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in tags.items()]


@pytest.fixture(scope="module")
def made(aws: Any) -> dict[str, str]:
    """Three subnets and three security groups of this run in the seeded VPC (name -> id)."""
    ec2 = aws.client("ec2")
    zones = sorted(aws.subnets)
    found: dict[str, str] = {}
    for index, (name, tags) in enumerate(
        {"a": {TEAM: "a", TIER: "x"}, "b": {TEAM: "b"}, "c": {TEAM: "c", TIER: "y"}}.items()
    ):
        found[f"subnet-{name}"] = ec2.create_subnet(
            VpcId=aws.vpc_id,
            CidrBlock=f"10.0.{200 + index}.0/24",
            AvailabilityZone=zones[index % len(zones)],
            TagSpecifications=[{"ResourceType": "subnet", "Tags": _tags(tags)}],
        )["Subnet"]["SubnetId"]
        found[f"sg-{name}"] = ec2.create_security_group(
            GroupName=f"{name}-{RUN}",
            Description="karpy selector-term test",
            VpcId=aws.vpc_id,
            TagSpecifications=[{"ResourceType": "security-group", "Tags": _tags(tags)}],
        )["GroupId"]
    return found


def describe_calls(clients: Clients, operation: str) -> list[Any]:
    """The Filters of every `operation` call the provider's EC2 client makes from now on."""
    calls: list[Any] = []
    clients.ec2.meta.events.register(
        f"provide-client-params.ec2.{operation}", lambda params, **_: calls.append(params.get("Filters"))
    )
    return calls


def test_several_tag_terms_select_the_union_one_call_each_cached(
    provider: AWSCloudProvider, clients: Clients, made: dict[str, str]
) -> None:
    calls = describe_calls(clients, "DescribeSubnets")
    terms = (SelectorTerm(tags={TEAM: "a"}), SelectorTerm(tags={TEAM: "b"}), SelectorTerm(tags={TEAM: "a"}))
    found = provider.subnets.get(terms)
    assert [s["SubnetId"] for s in found] == [made["subnet-a"], made["subnet-b"]]
    assert len(calls) == 2  # the repeated term is one cached filter set
    assert [s["SubnetId"] for s in provider.subnets.get(terms)] == [made["subnet-a"], made["subnet-b"]]
    assert len(calls) == 2


def test_an_id_term_selects_exactly_that_subnet(provider: AWSCloudProvider, made: dict[str, str]) -> None:
    found = provider.subnets.get((SelectorTerm(id=made["subnet-c"]),))
    assert [s["SubnetId"] for s in found] == [made["subnet-c"]]
    both = provider.subnets.get((SelectorTerm(id=made["subnet-c"]), SelectorTerm(id=made["subnet-b"])))
    assert sorted(s["SubnetId"] for s in both) == sorted([made["subnet-b"], made["subnet-c"]])


def test_a_star_value_selects_any_value_and_tags_are_anded(
    provider: AWSCloudProvider, made: dict[str, str]
) -> None:
    star = provider.subnets.get((SelectorTerm(tags={TIER: "*"}),))
    assert sorted(s["SubnetId"] for s in star) == sorted([made["subnet-a"], made["subnet-c"]])
    anded = provider.subnets.get((SelectorTerm(tags={TIER: "*", TEAM: "c"}),))
    assert [s["SubnetId"] for s in anded] == [made["subnet-c"]]


def test_a_tag_term_overlapping_an_id_term_lists_the_subnet_once(
    provider: AWSCloudProvider, made: dict[str, str]
) -> None:
    found = provider.subnets.get((SelectorTerm(tags={TEAM: "a"}), SelectorTerm(id=made["subnet-a"])))
    assert [s["SubnetId"] for s in found] == [made["subnet-a"]]


def test_nothing_selected_is_an_error_naming_the_terms(provider: AWSCloudProvider) -> None:
    with pytest.raises(CloudError, match="no subnets matched selector"):
        provider.subnets.get((SelectorTerm(tags={TEAM: "nobody"}), SelectorTerm(id="subnet-0000000")))


def test_security_groups_by_tags_name_and_id(
    provider: AWSCloudProvider, clients: Clients, made: dict[str, str]
) -> None:
    calls = describe_calls(clients, "DescribeSecurityGroups")
    terms = (
        SelectorTerm(tags={TEAM: "a"}),
        SelectorTerm(name=f"b-{RUN}"),
        SelectorTerm(id=made["sg-c"]),
    )
    assert provider.security_groups.ids(terms) == sorted([made["sg-a"], made["sg-b"], made["sg-c"]])
    assert [f[0]["Name"] for f in calls] == ["tag:" + TEAM, "group-id", "group-name"]
    assert provider.security_groups.ids((SelectorTerm(name=f"c-{RUN}"),)) == [made["sg-c"]]
    with pytest.raises(CloudError, match="no security groups"):
        provider.security_groups.ids((SelectorTerm(name=f"nobody-{RUN}"),))


def test_an_ec2nodeclass_of_id_terms_reports_those_subnets_in_its_status(
    provider: AWSCloudProvider, made: dict[str, str], aws: Any
) -> None:
    manifest = {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": f"ids-{RUN}"},
        "spec": {
            "role": "KarpenterNodeRole-demo",
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"id": made["subnet-a"]}, {"id": made["subnet-b"]}],
            "securityGroupSelectorTerms": [{"name": f"a-{RUN}"}, {"tags": {TEAM: "b"}}],
        },
    }
    loaded = load_ec2nodeclass(manifest, cluster_name=aws.cluster_name)
    status = provider.node_class_status(loaded.node_class)
    assert [s["id"] for s in status["subnets"]] == sorted([made["subnet-a"], made["subnet-b"]])
    assert [g["id"] for g in status["securityGroups"]] == sorted([made["sg-a"], made["sg-b"]])
