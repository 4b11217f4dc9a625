"""Steering consolidation from the API: `karpy.sh/consolidation-min-savings` on a Provisioner or a
NodePool, and NodePool `consolidationPolicy: Balanced` (Karpenter v1.14, k = 2)."""

from __future__ import annotations

from typing import Any

import pytest
from marshmallow import ValidationError

from extender.api.disruption import MIN_SAVINGS_ANNOTATION, SavingsThreshold, parse_min_savings
from extender.api.nodepool import parse_nodepool
from extender.api.provisioner_schema import load_provisioner
from tests import builders
from tests.builders import nodepool_manifest

from .test_nodepool import refusals

PATH = f"metadata.annotations[{MIN_SAVINGS_ANNOTATION}]"


def annotated(obj: dict[str, Any], value: Any) -> dict[str, Any]:
    obj["metadata"]["annotations"] = {MIN_SAVINGS_ANNOTATION: value, "other": "kept"}
    return obj


def provisioner(**spec: Any) -> dict[str, Any]:
    return builders.provisioner_manifest("p", consolidation={"enabled": True}, **spec)


@pytest.mark.parametrize(
    ("text", "per_hour", "fraction"),
    [
        ("0.05", 0.05, 0.0),
        ("$0.05/h", 0.05, 0.0),
        ("10%", 0.0, 0.10),
        ("0.1, 2.5%", 0.1, 0.025),
        ("25%,$1/h", 1.0, 0.25),
        ("0", 0.0, 0.0),
    ],
)
def test_the_annotation_reads_a_dollar_amount_a_share_or_both(
    text: str, per_hour: float, fraction: float
) -> None:
    expected = SavingsThreshold(per_hour=per_hour, fraction=fraction)
    assert parse_min_savings(text) == expected
    assert load_provisioner(annotated(provisioner(), text)).consolidation_min_savings == expected
    assert pool_min_savings(annotated(nodepool_manifest(), text)) == expected


def test_both_apis_default_to_two_cents_and_five_percent() -> None:
    """Today's values (decide.py's re-plan threshold before it was a setting)."""
    assert load_provisioner(provisioner()).consolidation_min_savings == SavingsThreshold(0.02, 0.05)
    assert pool_min_savings(nodepool_manifest()) == SavingsThreshold(0.02, 0.05)
    assert pool_min_savings(annotated(nodepool_manifest(), "0.5,50%")) == SavingsThreshold(0.5, 0.5)


def pool_min_savings(obj: dict[str, Any]) -> SavingsThreshold:
    return parse_nodepool(obj).consolidation_min_savings


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", '"" is not one or two comma-separated terms such as "0.05,10%"'),
        ("1,2,3%", '"1,2,3%" is not one or two comma-separated terms such as "0.05,10%"'),
        ("0.1,", '"0.1," is not one or two comma-separated terms such as "0.05,10%"'),
        ("cheap", '"cheap" is not a $/h amount ("0.05") or a percentage ("10%")'),
        ("5%,6%", '"5%,6%" gives a percentage twice'),
        ("1,2", '"1,2" gives a $/h amount twice'),
        ("150%", '"150%" is more than 100%'),
        ("-1", '"-1" must be a finite number at least 0'),
        ("nan", '"nan" must be a finite number at least 0'),
        ("inf%", '"inf%" must be a finite number at least 0'),
        ("9" * 65, "at most 64 characters (65 given)"),
        (5, "must be a string, not int"),
    ],
)
def test_admission_refuses_a_bad_threshold_with_its_field_path(value: Any, message: str) -> None:
    expected = [f"{PATH}: {message}"]
    assert refusals(load_provisioner, annotated(provisioner(), value)) == expected
    assert refusals(pool_min_savings, annotated(nodepool_manifest(), value)) == expected


def test_balanced_loads_as_consolidation_with_k_2() -> None:
    """Karpenter v1.14 ships Balanced with k fixed at 2 (kubernetes-sigs/karpenter#2962:
    "k=2 fixed for now"); its CRD has no consolidationThreshold field, so neither does karpy."""
    balanced = parse_nodepool(
        nodepool_manifest(disruption={"consolidationPolicy": "Balanced", "consolidateAfter": "30s"})
    )
    assert balanced.consolidation and balanced.consolidation_threshold == 2
    assert balanced.consolidate_after == 30 and balanced.ttl_seconds_after_empty is None
    plain = parse_nodepool(nodepool_manifest(disruption={"consolidationPolicy": "WhenEmptyOrUnderutilized"}))
    assert plain.consolidation and plain.consolidation_threshold is None
    never = parse_nodepool(
        nodepool_manifest(disruption={"consolidationPolicy": "Balanced", "consolidateAfter": "Never"})
    )
    assert not never.consolidation
    (refused,) = refusals(parse_nodepool, nodepool_manifest(disruption={"consolidationPolicy": "Sometimes"}))
    policies = "[WhenEmpty WhenEmptyOrUnderutilized Balanced]"
    assert refused == f'spec.disruption.consolidationPolicy: "Sometimes" not in {policies}'


def test_a_bad_threshold_loses_nothing_else() -> None:
    """The one refusal names the annotation; the object's other errors are still reported."""
    obj = annotated(provisioner(ttlSecondsAfterEmpty=30), "x")
    with pytest.raises(ValidationError) as err:
        load_provisioner(obj)
    assert len(err.value.messages) == 2 and err.value.messages[0].startswith(PATH)
