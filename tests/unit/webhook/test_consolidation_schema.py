"""spec.consolidation and spec.disruption (issue 12): Karpenter v1alpha5's consolidation switch and
karpy's disruption budget, each error naming its field path as the webhook reports it."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from extender.api.disruption import Budget
from extender.api.provisioner import DEFAULT_DISRUPTION_BUDGET
from extender.api.provisioner_schema import load_provisioner, validate_provisioner
from tests.unit.webhook.reviews import provisioner_manifest, valid_spec


def spec(**changes: Any) -> dict[str, Any]:
    base = valid_spec()
    base.pop("ttlSecondsAfterEmpty", None)
    base.update(copy.deepcopy(changes))
    return provisioner_manifest("p", **base)


def test_defaults_consolidation_off_and_a_ten_percent_budget() -> None:
    prov = load_provisioner(spec())
    assert prov.consolidation is False and DEFAULT_DISRUPTION_BUDGET == "10%"
    assert prov.budgets == (Budget(DEFAULT_DISRUPTION_BUDGET),)


def test_consolidation_and_budget_load() -> None:
    prov = load_provisioner(spec(consolidation={"enabled": True}, disruption={"nodes": "1"}))
    assert prov.consolidation is True and prov.budgets == (Budget("1"),)


def test_consolidation_excludes_the_empty_ttl_naming_the_field() -> None:
    """Karpenter v1alpha5 webhook: consolidation.enabled and ttlSecondsAfterEmpty are mutually exclusive."""
    problems = validate_provisioner(spec(consolidation={"enabled": True}, ttlSecondsAfterEmpty=30))
    assert problems == [
        "spec.consolidation.enabled: consolidation.enabled and ttlSecondsAfterEmpty are mutually exclusive"
    ]
    assert validate_provisioner(spec(consolidation={"enabled": False}, ttlSecondsAfterEmpty=30)) == []


@pytest.mark.parametrize(
    ("changes", "path"),
    [
        ({"consolidation": {"enabled": "yes"}}, "spec.consolidation.enabled"),
        ({"disruption": {"nodes": "101%"}}, "spec.disruption.nodes"),
        ({"disruption": {"nodes": "-1"}}, "spec.disruption.nodes"),
        ({"disruption": {"nodes": "ten"}}, "spec.disruption.nodes"),
        ({"disruption": {"nodes": 3}}, "spec.disruption.nodes"),
    ],
)
def test_invalid_values_name_their_path(changes: dict[str, Any], path: str) -> None:
    problems = validate_provisioner(spec(**changes))
    assert problems and all(p.startswith(f"{path}: ") for p in problems), problems


@pytest.mark.parametrize("nodes", ["0", "1", "25", "0%", "10%", "100%"])
def test_valid_budgets(nodes: str) -> None:
    assert validate_provisioner(spec(disruption={"nodes": nodes})) == []
