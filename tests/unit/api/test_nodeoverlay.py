"""NodeOverlay manifests (extender/api/nodeoverlay.py): Karpenter v1.14's rules for the kind
(kubernetes-sigs/karpenter pkg/apis/v1alpha1/nodeoverlay.go, karpenter.sh_nodeoverlays.yaml CEL,
nodeoverlay_validation.go RuntimeValidate, cases from nodeoverlay_validation_test.go), and what
karpy refuses by name."""

from __future__ import annotations

from typing import Any

import pytest

from extender.api.nodeoverlay import load_nodeoverlay, validate_nodeoverlay
from extender.api.provisioner import Requirement
from extender.api.resources import Resources


def manifest(*requirements: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1alpha1",
        "kind": "NodeOverlay",
        "metadata": {"name": "overlay"},
        "spec": {"requirements": list(requirements), **spec},
    }


def req(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values)}


def test_loads_every_field() -> None:
    loaded = load_nodeoverlay(
        manifest(
            req("node.kubernetes.io/instance-type", "In", "m5.large"),
            priceAdjustment="-10%",
            capacity={"example.com/widget": 4, "hugepages-2Mi": "1Gi"},
            weight=10,
        )
    )
    assert loaded.name == "overlay"
    assert loaded.requirements == (Requirement("node.kubernetes.io/instance-type", "In", ("m5.large",)),)
    assert loaded.price == "-10%"
    assert loaded.capacity == Resources({"example.com/widget": 4, "hugepages-2Mi": 2**30})
    assert loaded.weight == 10
    assert load_nodeoverlay(manifest(price="0.5")).price == "0.5"
    # An unset weight is 0 (nodeoverlay.go: "treated as having a weight of 0").
    assert load_nodeoverlay(manifest()).weight == 0


@pytest.mark.parametrize(
    "requirement",
    [
        req("Test", "Exists"),
        req("test.com/Test", "Exists"),
        req("karpenter.sh/nodepool", "In", "batch"),
        req("karpenter.sh/capacity-type", "In", "spot"),
        req("topology.kubernetes.io/zone", "Gt", "1"),
        req("kubernetes.io/test", "In", "test"),
        req("subdomain.k8s.io/test", "In", "test"),
        req("karpenter.k8s.aws/instance-family", "In", "m5"),
        req("topology.kubernetes.io/zone", "NotIn", "test", "bar"),
    ],
)
def test_admits_what_karpenter_admits(requirement: dict[str, Any]) -> None:
    """nodeoverlay_validation_test.go: valid keys, the karpenter.sh/nodepool exception, kubernetes.io
    domain exceptions, supported operators."""
    assert validate_nodeoverlay(manifest(requirement)) == []


@pytest.mark.parametrize(
    ("spec", "path", "words"),
    [
        ({"requirements": [req("Test", "In")]}, "spec.requirements[0].values", "must not be empty"),
        ({"requirements": [req("Test", "NotIn")]}, "spec.requirements[0].values", "must not be empty"),
        ({"requirements": [req("test.com.com}", "Exists")]}, "spec.requirements[0].key", "invalid key"),
        ({"requirements": [req("test/test/test", "Exists")]}, "spec.requirements[0].key", "invalid key"),
        ({"requirements": [req("karpenter.sh/test", "In", "x")]}, "spec.requirements[0].key", "karpenter.sh"),
        (
            {"requirements": [req("karpenter.k8s.aws/bogus", "Exists")]},
            "spec.requirements[0].key",
            "restricted",
        ),
        (
            {"requirements": [req("kubernetes.io/hostname", "Exists")]},
            "spec.requirements[0].key",
            "restricted",
        ),
        ({"requirements": [req("zone", "unknown", "x")]}, "spec.requirements[0].operator", "not in"),
        ({"requirements": [req("zone", "Gt", "-1")]}, "spec.requirements[0].values", "integer"),
        ({"requirements": [req("zone", "Gt", "1", "2")]}, "spec.requirements[0].values", "integer"),
        (
            {"requirements": [req("karpenter.sh/capacity-type", "In", "cheap")]},
            "spec.requirements[0].values",
            "on-demand",
        ),
        ({"requirements": [], "price": "1", "priceAdjustment": "+1"}, "spec.price", "cannot set both"),
        ({"requirements": [], "capacity": {"cpu": "1"}}, "spec.capacity.cpu", "restricted"),
        ({"requirements": [], "capacity": {"memory": "34Gi"}}, "spec.capacity.memory", "restricted"),
        ({"requirements": [], "capacity": {"pods": "324"}}, "spec.capacity.pods", "restricted"),
        (
            {"requirements": [], "capacity": {"ephemeral-storage": "1Gi"}},
            "spec.capacity.ephemeral-storage",
            "restricted",
        ),
        ({"requirements": [], "capacity": {"example.com/x": "lots"}}, "spec.capacity.example.com/x", ""),
        ({"requirements": [], "weight": 0}, "spec.weight", "between 1 and 10000"),
        ({"requirements": [], "weight": 10001}, "spec.weight", "between 1 and 10000"),
        ({}, "spec.requirements", "required"),
    ],
)
def test_refuses_with_the_field_path(spec: dict[str, Any], path: str, words: str) -> None:
    problems = validate_nodeoverlay({"metadata": {"name": "o"}, "spec": spec})
    assert any(p.startswith(path + ":") and words in p for p in problems), problems


#: nodeoverlay_validation_test.go Context("price") "Invalid Input" table.
INVALID_PRICES = (
    "+42",
    ".5",
    "42.",
    "42%",
    "3,14",
    "1e10",
    "0x42",
    "forty-two",
    "42a",
    "42 ",
    " 42",
    "42.0.0",
    "-",
    ".",
    "-.42",
)


@pytest.mark.parametrize("price", INVALID_PRICES)
def test_price_pattern(price: str) -> None:
    """nodeoverlay_validation_test.go Context("price") "Invalid Input" table."""
    assert any(p.startswith("spec.price:") for p in validate_nodeoverlay(manifest(price=price)))


@pytest.mark.parametrize(
    "good", ["+1%", "-1%", "-100%", "+100.102%", "+298%", "+43", "-43", "+34.43", "-34.43"]
)
def test_price_adjustment_admitted(good: str) -> None:
    """nodeoverlay_validation_test.go Context("priceAdjustment"): the values it allows."""
    assert validate_nodeoverlay(manifest(priceAdjustment=good)) == []


@pytest.mark.parametrize("bad", ["1%", "1", "1.3", "-100.0%", "-101.1%", "-129%", "42"])
def test_price_adjustment_refused(bad: str) -> None:
    """Unsigned adjustments, and decreases past -100 % (the CRD's pattern)."""
    assert any(
        p.startswith("spec.priceAdjustment:") for p in validate_nodeoverlay(manifest(priceAdjustment=bad))
    )


@pytest.mark.parametrize("op", ["Gte", "Lte"])
def test_refuses_what_karpy_cannot_honour_by_name(op: str) -> None:
    """Karpenter admits Gte/Lte; karpy's requirement algebra has no such operators."""
    problems = validate_nodeoverlay(manifest(req("karpenter.k8s.aws/instance-cpu", op, "4")))
    assert problems == [
        f"spec.requirements[0].operator: operator {op} is not supported by karpy"
        " (use [In NotIn Exists DoesNotExist Gt Lt])"
    ]


def test_not_an_object() -> None:
    assert validate_nodeoverlay([]) == ["a NodeOverlay must be an object"]
