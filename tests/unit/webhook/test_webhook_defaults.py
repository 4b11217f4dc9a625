"""Provisioner defaulting (`provisioner_defaults.default_manifest`), Karpenter 0.5's DefaultHook."""

from __future__ import annotations

from typing import Any

from extender.api.provisioner_defaults import default_manifest
from extender.api.provisioner_schema import validate_provisioner
from tests.unit.webhook.reviews import provisioner_manifest


def defaults(**spec: Any) -> dict[str, Any]:
    return default_manifest(
        provisioner_manifest("p", **spec), cluster_name="prod", cluster_endpoint="https://k"
    )["spec"]


def test_walkthrough_alias_rewritten_arch_defaulted_selectors_from_cluster() -> None:
    spec = defaults(
        requirements=[{"key": "node.k8s.aws/capacity-type", "operator": "In", "values": ["spot"]}],
        provider={
            "instanceProfile": "KarpenterNodeInstanceProfile-demo",
            "cluster": {"name": "demo", "endpoint": "https://127.0.0.1:6443"},
        },
        ttlSecondsAfterEmpty=30,
    )
    assert spec["requirements"] == [
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
    ]
    assert spec["provider"]["subnetSelector"] == {"kubernetes.io/cluster/demo": "*"}
    assert spec["provider"]["securityGroupSelector"] == {"kubernetes.io/cluster/demo": "*"}
    assert spec["provider"]["cluster"] == {"name": "demo", "endpoint": "https://127.0.0.1:6443"}
    assert spec["ttlSecondsAfterEmpty"] == 30


def test_empty_spec_gets_arch_on_demand_and_the_configured_cluster() -> None:
    spec = defaults()
    assert spec["requirements"] == [
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
    ]
    assert spec["provider"] == {
        "cluster": {"name": "prod", "endpoint": "https://k"},
        "subnetSelector": {"kubernetes.io/cluster/prod": "*"},
        "securityGroupSelector": {"kubernetes.io/cluster/prod": "*"},
    }
    # Validation still insists on an instance profile: defaulting cannot invent one.
    assert validate_provisioner(provisioner_manifest("p", **spec)) == [
        "spec.provider.instanceProfile: missing required field"
    ]


def test_labels_count_as_mentioning_a_key_and_alias_label_is_rewritten() -> None:
    spec = defaults(labels={"kubernetes.io/arch": "arm64", "node.k8s.aws/capacity-type": "spot"})
    assert spec["labels"] == {"kubernetes.io/arch": "arm64", "karpenter.sh/capacity-type": "spot"}
    assert spec["requirements"] == []


def test_explicit_selectors_are_kept_and_input_is_not_modified() -> None:
    manifest = provisioner_manifest(
        "p", provider={"instanceProfile": "x", "subnetSelector": {"Name": "private"}}
    )
    before = repr(manifest)
    spec = default_manifest(manifest, cluster_name="prod")["spec"]
    assert spec["provider"]["subnetSelector"] == {"Name": "private"}
    assert spec["provider"]["securityGroupSelector"] == {"kubernetes.io/cluster/prod": "*"}
    assert spec["provider"]["cluster"] == {"name": "prod"}
    assert repr(manifest) == before


def test_wrong_shapes_are_left_for_validation() -> None:
    assert defaults(requirements="nope", provider=[1])["requirements"] == "nope"
    assert default_manifest({"kind": "Provisioner", "spec": 5}, cluster_name="c") == {
        "kind": "Provisioner",
        "spec": 5,
    }


def test_default_instance_profile_fills_only_a_missing_one() -> None:
    def profile(provider: dict[str, Any]) -> Any:
        manifest = provisioner_manifest("p", provider=provider)
        return default_manifest(manifest, cluster_name="c", instance_profile="Default")["spec"][
            "provider"
        ].get("instanceProfile")

    assert profile({}) == "Default"
    assert profile({"instanceProfile": "Mine"}) == "Mine"
    assert profile({"launchTemplate": "lt"}) is None
