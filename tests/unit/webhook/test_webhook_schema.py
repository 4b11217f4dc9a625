"""The marshmallow Provisioner schema: every issue-4 rule, each error naming its field path."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from marshmallow import ValidationError

from extender.api.provisioner_schema import load_provisioner, validate_provisioner
from tests.unit.webhook.reviews import provisioner_manifest, valid_spec


def with_spec(**changes: Any) -> dict[str, Any]:
    spec = valid_spec()
    spec.update(copy.deepcopy(changes))
    return provisioner_manifest("p", **spec)


def test_walkthrough_provisioner_is_valid_and_alias_is_canonical_after_load() -> None:
    assert validate_provisioner(with_spec()) == []
    prov = load_provisioner(
        with_spec(requirements=[{"key": "node.k8s.aws/capacity-type", "operator": "In", "values": ["spot"]}])
    )
    assert prov.requirements[0].key == "karpenter.sh/capacity-type"
    assert prov.ttl_seconds_after_empty == 30
    assert prov.provider.cluster is not None and prov.provider.cluster.name == "demo"


def req(key: str, operator: str, values: list[str] | None = None) -> dict[str, Any]:
    return {"key": key, "operator": operator, **({"values": values} if values is not None else {})}


ZONE = "topology.kubernetes.io/zone"

INVALID: list[tuple[str, dict[str, Any], str]] = [
    (
        "bad-operator",
        {"requirements": [req(ZONE, "In", ["a"]), req(ZONE, "Foo", ["a"])]},
        'spec.requirements[1].operator: "Foo" not in [In NotIn Exists DoesNotExist Gt Lt]',
    ),
    ("negative-ttl-empty", {"ttlSecondsAfterEmpty": -1}, "spec.ttlSecondsAfterEmpty: cannot be negative"),
    (
        "negative-ttl-expired",
        {"ttlSecondsUntilExpired": -5},
        "spec.ttlSecondsUntilExpired: cannot be negative",
    ),
    (
        "restricted-domain",
        {"labels": {"example.kubernetes.io/team": "a"}},
        'spec.labels["example.kubernetes.io/team"]: label domain not allowed',
    ),
    (
        "karpenter-domain",
        {"labels": {"karpenter.sh/foo": "a"}},
        'spec.labels["karpenter.sh/foo"]: label domain',
    ),
    (
        "hostname-label",
        {"labels": {"kubernetes.io/hostname": "x"}},
        'spec.labels["kubernetes.io/hostname"]: label is restricted',
    ),
    (
        "provisioner-name-label",
        {"labels": {"karpenter.sh/provisioner-name": "x"}},
        'spec.labels["karpenter.sh/provisioner-name"]: label is restricted',
    ),
    ("unqualified-label", {"labels": {"bad key!": "a"}}, 'spec.labels["bad key!"]: invalid key name'),
    (
        "bad-label-value",
        {"labels": {"team": "not valid!"}},
        'spec.labels["team"]: invalid value "not valid!"',
    ),
    (
        "bad-taint-effect",
        {"taints": [{"key": "gpu", "effect": "Sometimes"}]},
        'spec.taints[0].effect: "Sometimes" not in [NoSchedule PreferNoSchedule NoExecute]',
    ),
    (
        "bad-taint-key",
        {"taints": [{"key": "bad key", "effect": "NoSchedule"}]},
        "spec.taints[0].key: invalid key",
    ),
    (
        "gt-two-values",
        {"requirements": [req("team", "Gt", ["1", "2"])], "labels": {"team": "1"}},
        "spec.requirements[0].values: operator Gt takes exactly one non-negative integer value",
    ),
    (
        "lt-not-integer",
        {"requirements": [req("team", "Lt", ["x"])], "labels": {"team": "1"}},
        "spec.requirements[0].values: operator Lt takes exactly one non-negative integer value",
    ),
    (
        "exists-with-values",
        {"requirements": [req(ZONE, "Exists", ["a"])]},
        "spec.requirements[0].values: must be empty for operator Exists",
    ),
    (
        "in-without-values",
        {"requirements": [req(ZONE, "In", [])]},
        "spec.requirements[0].values: must not be empty for operator In",
    ),
    (
        "unknown-key",
        {"requirements": [req("example.com/team", "In", ["a"])]},
        'spec.requirements[0].key: "example.com/team" not in [',
    ),
    (
        "hostname-requirement",
        {"requirements": [req("kubernetes.io/hostname", "In", ["a"])]},
        'spec.requirements[0].key: "kubernetes.io/hostname" is restricted',
    ),
    (
        "missing-profile",
        {"provider": {"subnetSelector": {"a": "b"}}},
        "spec.provider.instanceProfile: missing",
    ),
    (
        "empty-selector",
        {"provider": {"instanceProfile": "p", "subnetSelector": {}}},
        "spec.provider.subnetSelector: must not be empty",
    ),
    (
        "empty-selector-value",
        {"provider": {"instanceProfile": "p", "securityGroupSelector": {"k": ""}}},
        'spec.provider.securityGroupSelector["k"]: key and value must be non-empty',
    ),
    (
        "empty-tag-key",
        {"provider": {"instanceProfile": "p", "tags": {"": "v"}}},
        'spec.provider.tags[""]: empty tag keys are not supported',
    ),
    (
        "misspelt-provider-field",
        {"provider": {"instanceProfile": "p", "subnetSelecter": {"a": "b"}}},
        "spec.provider.subnetSelecter: Unknown field.",
    ),
    (
        "empty-cluster-name",
        {"provider": {"instanceProfile": "p", "cluster": {"name": ""}}},
        "spec.provider.cluster.name: must not be empty",
    ),
    (
        "bad-ami-family",
        {"provider": {"instanceProfile": "p", "amiFamily": "Windows"}},
        'spec.provider.amiFamily: "Windows" not in [AL2023 AL2 Bottlerocket Ubuntu Custom]',
    ),
    (
        "negative-limit",
        {"limits": {"resources": {"cpu": "-1"}}},
        "spec.limits.resources.cpu: negative quantity",
    ),
    ("bad-quantity", {"limits": {"resources": {"memory": "lots"}}}, "spec.limits.resources.memory:"),
    (
        # Issue 26, found while probing: parsed to infinity and stored.
        "infinite-limit",
        {"limits": {"resources": {"cpu": "1e400"}}},
        'spec.limits.resources.cpu: "1e400" is larger than 1e+15',
    ),
    (
        # Issue 26, found while probing: 10,000 values were stored.
        "too-many-values",
        {
            "requirements": [
                {"key": "kubernetes.io/arch", "operator": "In", "values": [f"v{i}" for i in range(10_000)]}
            ]
        },
        "spec.requirements[0].values: at most 500 values",
    ),
    (
        # Issue 24: accepted and ignored before.
        "uncountable-limit",
        {"limits": {"resources": {"cpu": "10", "hugepages-2Mi": "1Gi"}}},
        "spec.limits.resources.hugepages-2Mi: karpy cannot count this resource in limits",
    ),
    (
        "bad-dns",
        {"kubeletConfiguration": {"clusterDNS": ["10.0.0.10", "dns"]}},
        'spec.kubeletConfiguration.clusterDNS[1]: "dns" is not an IP address',
    ),
    ("weight-too-high", {"weight": 101}, "spec.weight:"),
    ("ttl-as-string", {"ttlSecondsAfterEmpty": "30"}, "spec.ttlSecondsAfterEmpty: Not a valid integer."),
]


@pytest.mark.parametrize(("changes", "expected"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid_provisioner_error_names_its_field_path(changes: dict[str, Any], expected: str) -> None:
    problems = validate_provisioner(with_spec(**changes))
    assert any(p.startswith(expected) for p in problems), problems


def test_load_raises_flat_path_messages() -> None:
    with pytest.raises(ValidationError) as err:
        load_provisioner(with_spec(ttlSecondsAfterEmpty=-1, weight=-1))
    assert err.value.messages == [
        "spec.ttlSecondsAfterEmpty: cannot be negative",
        "spec.weight: Must be greater than or equal to 0 and less than or equal to 100.",
    ]


def test_all_problems_are_reported_together() -> None:
    problems = validate_provisioner(
        with_spec(
            requirements=[req("example.com/x", "Foo", ["a"])],
            ttlSecondsUntilExpired=-1,
        )
    )
    assert 'spec.requirements[0].operator: "Foo" not in [In NotIn Exists DoesNotExist Gt Lt]' in problems
    assert any(p.startswith('spec.requirements[0].key: "example.com/x" not in') for p in problems)
    assert "spec.ttlSecondsUntilExpired: cannot be negative" in problems


def test_requirement_on_a_declared_label_and_well_known_labels_are_allowed() -> None:
    spec = {
        "labels": {"team": "ml", "kubernetes.io/arch": "arm64", "node.k8s.aws/capacity-type": "spot"},
        "requirements": [req("team", "In", ["ml"]), req("team", "Gt", ["3"]), req(ZONE, "Exists")],
    }
    assert validate_provisioner(with_spec(**spec)) == []


def test_launch_template_replaces_instance_profile() -> None:
    assert validate_provisioner(with_spec(provider={"launchTemplate": "lt"})) == []


def test_provisioner_without_provider_still_loads_for_plan() -> None:
    prov = load_provisioner(provisioner_manifest("plain"))
    assert prov.name == "plain" and prov.provider.instance_profile == ""


def test_not_a_provisioner() -> None:
    assert validate_provisioner({"kind": "Deployment", "metadata": {"name": "x"}}) == [
        "kind: Must be equal to Provisioner."
    ]
    assert validate_provisioner([1, 2]) == ["Invalid input type."]
    assert validate_provisioner({"kind": "Provisioner"}) == ["metadata: Missing data for required field."]


def test_odd_unicode_is_escaped_in_messages() -> None:
    problems = validate_provisioner(with_spec(labels={"t\u202eam\ud800": "a"}))
    assert problems == [
        'spec.labels["t\\u202eam\\ud800"]: invalid key name "t\\u202eam\\ud800": '
        "name must be 1-63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric"
    ]


def test_a_huge_value_is_cut_in_the_message() -> None:
    """Issue 26, found while probing: a 1 MB label value was refused with a 1 MB message repeating it."""
    problems = validate_provisioner(with_spec(labels={"team": "x" * 1_000_000}))
    assert problems and all(len(p) < 300 for p in problems), [len(p) for p in problems]
    assert "(1000000 characters)" in problems[0] and problems[0].startswith('spec.labels["team"]')
