"""EC2NodeClass subnetSelectorTerms / securityGroupSelectorTerms, loaded as Karpenter v1 reads them.

Rules ported from aws/karpenter-provider-aws v1.14.1 pkg/apis/v1/ec2nodeclass.go (the CEL rules
on `SubnetSelectorTerms` / `SecurityGroupSelectorTerms`, the `Pattern` on `ID`, `MaxItems`,
`MaxProperties`, the tags rule "empty tag keys or values aren't supported") and the filter sets of
pkg/providers/subnet/subnet.go and securitygroup/securitygroup.go `getFilterSets`.
"""

from __future__ import annotations

from typing import Any

import pytest
from marshmallow import ValidationError

from extender.api import nodeclass as nc
from extender.api.ec2nodeclass import load_ec2nodeclass
from extender.api.migrate import node_class as convert_node_class
from extender.cloud.aws.selectors import filter_sets, tag_filters

TAGS = {"karpenter.sh/discovery": "demo"}


def manifest(subnets: Any = None, groups: Any = None) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "default"},
        "spec": {
            "role": "KarpenterNodeRole-demo",
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": subnets if subnets is not None else [{"tags": TAGS}],
            "securityGroupSelectorTerms": groups if groups is not None else [{"tags": TAGS}],
        },
    }


def refusals(obj: dict[str, Any]) -> list[str]:
    with pytest.raises(ValidationError) as err:
        load_ec2nodeclass(obj, cluster_name="demo")
    return list(err.value.messages)


def test_several_terms_of_tags_ids_and_names_load_in_order() -> None:
    # Karpenter docs concepts/nodeclasses "subnetSelectorTerms": terms ORed, a term's tags ANDed.
    loaded = load_ec2nodeclass(
        manifest(
            subnets=[
                {"tags": {"Name": "private-a", "tier": "*"}},
                {"id": "subnet-0a1"},
                {"id": "subnet-0b2"},
            ],
            groups=[{"id": "sg-0a1"}, {"name": "eks-cluster-sg-demo"}, {"tags": TAGS}],
        ),
        cluster_name="demo",
    ).node_class
    assert loaded.subnet_selector == (
        nc.SelectorTerm(tags={"Name": "private-a", "tier": "*"}),
        nc.SelectorTerm(id="subnet-0a1"),
        nc.SelectorTerm(id="subnet-0b2"),
    )
    assert loaded.security_group_selector == (
        nc.SelectorTerm(id="sg-0a1"),
        nc.SelectorTerm(name="eks-cluster-sg-demo"),
        nc.SelectorTerm(tags=TAGS),
    )


def test_a_v1_tag_value_is_matched_exactly() -> None:
    # subnet.go getFilterSets: `tag:<key>` with the one value (v1 does not split commas).
    loaded = load_ec2nodeclass(manifest(subnets=[{"tags": {"Name": "a,b"}}]), cluster_name="demo")
    assert loaded.node_class.subnet_selector == (nc.SelectorTerm(tags={"Name": "a,b"}),)
    assert tag_filters({"Name": "a,b", "k": "*"}) == [
        {"Name": "tag:Name", "Values": ["a,b"]},
        {"Name": "tag-key", "Values": ["k"]},
    ]


@pytest.mark.parametrize(
    ("subnets", "groups", "expected"),
    [
        # CEL "subnetSelectorTerms cannot be empty"
        ([], None, "spec.subnetSelectorTerms: must list at least one term"),
        # CEL "expected at least one, got none, ['tags', 'id']"
        (
            [{"tags": TAGS}, {}],
            None,
            "spec.subnetSelectorTerms[1]: expected at least one, got none, ['tags', 'id']",
        ),
        (
            None,
            [{}],
            "spec.securityGroupSelectorTerms[0]: expected at least one, got none, ['tags', 'id', 'name']",
        ),
        # CEL "'id' is mutually exclusive, cannot be set with a combination of other fields ..."
        (
            [{"id": "subnet-1", "tags": TAGS}],
            None,
            "spec.subnetSelectorTerms[0].id: 'id' is mutually exclusive, cannot be set with a combination "
            "of other fields in a subnet selector term",
        ),
        (
            None,
            [{"id": "sg-1", "name": "n"}],
            "spec.securityGroupSelectorTerms[0].id: 'id' is mutually exclusive, cannot be set with a "
            "combination of other fields in a security group selector term",
        ),
        # CEL "'name' is mutually exclusive, ..."
        (
            None,
            [{"name": "n", "tags": TAGS}],
            "spec.securityGroupSelectorTerms[0].name: 'name' is mutually exclusive, cannot be set with a "
            "combination of other fields in a security group selector term",
        ),
        # Tags XValidation "empty tag keys or values aren't supported"
        (
            [{"tags": {"k": ""}}],
            None,
            "spec.subnetSelectorTerms[0].tags: empty tag keys or values aren't supported",
        ),
        (
            None,
            [{"tags": {"": "v"}}],
            "spec.securityGroupSelectorTerms[0].tags: empty tag keys or values aren't supported",
        ),
        # ID Pattern "subnet-[0-9a-z]+" / "sg-[0-9a-z]+"
        ([{"id": "sg-1"}], None, 'spec.subnetSelectorTerms[0].id: "sg-1" does not match "subnet-[0-9a-z]+"'),
        (None, [{"id": "subnet-1"}], 'spec.securityGroupSelectorTerms[0].id: "subnet-1" does not match'),
        # subnet terms have no `name` (SubnetSelectorTerm has tags and id only)
        ([{"name": "n"}], None, "spec.subnetSelectorTerms[0].name: unknown field"),
        # MaxItems 30, MaxProperties 20
        ([{"id": f"subnet-{i}"} for i in range(31)], None, "spec.subnetSelectorTerms: at most 30 terms"),
        (
            [{"tags": {f"k{i}": "v" for i in range(21)}}],
            None,
            "spec.subnetSelectorTerms[0].tags: at most 20 tags",
        ),
        # karpy's own: an empty tags map would select every subnet of the account
        ([{"tags": {}}], None, "spec.subnetSelectorTerms[0].tags: must not be empty"),
    ],
)
def test_term_refusals_name_the_field(subnets: Any, groups: Any, expected: str) -> None:
    messages = refusals(manifest(subnets, groups))
    assert any(m.startswith(expected) for m in messages), messages


def test_every_bad_term_is_reported() -> None:
    messages = refusals(manifest(subnets=[{"id": "x"}, {"tags": TAGS}, {"name": "n"}]))
    assert [m.split(":")[0] for m in messages] == [
        "spec.subnetSelectorTerms[0].id",
        "spec.subnetSelectorTerms[2].name",
    ]


def test_filter_sets_follow_karpenters_get_filter_sets() -> None:
    # securitygroup.go getFilterSets: one set per tag term, then every id, then every name.
    terms = (
        nc.SelectorTerm(id="sg-1"),
        nc.SelectorTerm(tags={"a": "*", "b": "c"}),
        nc.SelectorTerm(name="web"),
        nc.SelectorTerm(id="sg-2"),
        nc.SelectorTerm(name="db"),
    )
    assert filter_sets(terms, id_filter="group-id", name_filter="group-name") == [
        [{"Name": "tag-key", "Values": ["a"]}, {"Name": "tag:b", "Values": ["c"]}],
        [{"Name": "group-id", "Values": ["sg-1", "sg-2"]}],
        [{"Name": "group-name", "Values": ["web", "db"]}],
    ]


def test_a_v1alpha5_map_is_one_term_per_combination_of_its_comma_values() -> None:
    # v1alpha5 (Karpenter v0.x getFilters): "a,b" matches either value; v1 ORs terms instead.
    assert nc.tag_terms({"Name": "a, b", "k": "*"}) == (
        nc.SelectorTerm(tags={"Name": "a", "k": "*"}),
        nc.SelectorTerm(tags={"Name": "b", "k": "*"}),
    )
    assert nc.tag_terms({}) == ()


def test_convert_writes_ids_and_comma_values_as_terms_the_loader_reads() -> None:
    provider = {
        "instanceProfile": "Profile",
        "subnetSelector": {"aws-ids": "subnet-1,subnet-2"},
        "securityGroupSelector": {"Name": "web,db", "karpenter.sh/discovery": "demo"},
    }
    out = convert_node_class("default", provider, None, "Provisioner/default.spec.provider")
    (klass,) = out.objects
    assert klass["spec"]["subnetSelectorTerms"] == [{"id": "subnet-1"}, {"id": "subnet-2"}]
    assert klass["spec"]["securityGroupSelectorTerms"] == [
        {"tags": {"Name": "web", "karpenter.sh/discovery": "demo"}},
        {"tags": {"Name": "db", "karpenter.sh/discovery": "demo"}},
    ]
    assert not [n for n in out.notes if "Selector" in n], out.notes
    loaded = load_ec2nodeclass(klass, cluster_name="demo").node_class
    assert [t.id for t in loaded.subnet_selector] == ["subnet-1", "subnet-2"]
    assert len(loaded.security_group_selector) == 2


def test_the_loader_agrees_with_karpenters_cel_cases_on_selector_terms() -> None:
    # aws/karpenter-provider-aws pkg/apis/v1/ec2nodeclass_validation_cel_test.go, the
    # SubnetSelectorTerms / SecurityGroupSelectorTerms contexts (ported in v1_cel_cases.py and
    # applied to the API server by tests/integration/test_v1_crd_validation.py).
    from tests.integration.v1_cel_cases import selector_term_cases, terms

    cases = [
        *selector_term_cases("subnet", "subnet", "subnet-12345749"),
        *selector_term_cases("securityGroup", "security group", "sg-12345749"),
    ]
    named = [
        (terms("securityGroup", {"name": "testname"}), True),
        (terms("securityGroup", {"id": "sg-12345749", "name": "my-security-group"}), False),
        (terms("securityGroup", {"name": "my-security-group", "tags": {"test": "testvalue"}}), False),
    ]
    checked = [(case.name, case.manifest(), case.stored) for case in cases]
    for edit, stored in named:
        obj = manifest()
        edit(obj)
        checked.append((str(obj["spec"]["securityGroupSelectorTerms"]), obj, stored))
    for name, obj, stored in checked:
        try:
            load_ec2nodeclass(obj, cluster_name="demo")
            loaded = True
        except ValidationError:
            loaded = False
        assert loaded == stored, name
    assert len(checked) == 23
