"""spec.consolidation and spec.disruption (issue 12): Karpenter v1alpha5's consolidation switch and
karpy's disruption budget, each error naming its field path as the webhook reports it."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from flask.testing import FlaskClient

from extender.api.disruption import MIN_SAVINGS_ANNOTATION, Budget
from extender.api.provisioner import DEFAULT_DISRUPTION_BUDGET
from extender.api.provisioner_schema import load_provisioner, validate_provisioner
from tests.unit.webhook.reviews import make_review, provisioner_manifest, valid_spec
from tests.unit.webhook.test_webhook_routes import post

NODE_CLASS_REF = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}


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


def test_the_webhook_denies_a_bad_savings_threshold_naming_the_annotation(client: FlaskClient) -> None:
    """Both kinds, through the admission routes the API server calls."""
    path = f"metadata.annotations[{MIN_SAVINGS_ANNOTATION}]"
    prov = spec(consolidation={"enabled": True})
    pool = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "np"},
        "spec": {
            "template": {"spec": {"requirements": [], "nodeClassRef": NODE_CLASS_REF}},
            "disruption": {"consolidationPolicy": "Balanced"},
        },
    }
    for route, obj, kind in (
        ("/validate/provisioner", prov, {}),
        ("/validate/nodepool", pool, {"version": "v1", "kind": "NodePool"}),
    ):
        obj["metadata"]["annotations"] = {MIN_SAVINGS_ANNOTATION: "0.05,10%"}
        _, ok = post(client, route, make_review(obj, **kind))
        assert ok["response"]["allowed"] is True, ok
        obj["metadata"]["annotations"] = {MIN_SAVINGS_ANNOTATION: "5 cents"}
        _, denied = post(client, route, make_review(obj, **kind))
        assert denied["response"]["allowed"] is False
        assert denied["response"]["status"]["message"] == (
            f'{path}: "5 cents" is not a $/h amount ("0.05") or a percentage ("10%")'
        )
