"""Static NodePools (`spec.replicas`) and node limits (`limits.nodes`) on the one model.

Sources: kubernetes-sigs/karpenter v1.14 pkg/apis/crds/karpenter.sh_nodepools.yaml (the `replicas`
field and the three CEL rules tying it to `limits`, `weight` and its own presence) and
designs/nodepool-node-limits.md (`limits.nodes`, also on dynamic pools). The CEL cases are
Karpenter's own (pkg/apis/v1/nodepool_validation_cel_test.go, as tests/integration/v1_cel_cases.py
ports them): here karpy's webhook check decides them, there the API server does.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from extender.api.nodepool import load_nodepool, validate_nodepool
from extender.api.provisioner_schema import load_provisioner
from extender.api.resources import NODES
from tests.builders import nodepool_manifest
from tests.integration.v1_cel_cases import NODEPOOL_CASES, Case
from tests.unit.api.test_nodepool import refusals
from webhook.admission import AdmissionRequest, GroupVersionKind
from webhook.nodepool import validate_nodepool as admit_nodepool

REF = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}


def test_replicas_load_as_a_static_pool_that_is_never_consolidated_or_emptied() -> None:
    loaded = load_nodepool(nodepool_manifest(replicas=3))
    assert loaded.replicas == 3 and loaded.is_static
    assert not loaded.consolidation and loaded.ttl_seconds_after_empty is None
    empty_policy = nodepool_manifest(
        replicas=0, disruption={"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s"}
    )
    loaded = load_nodepool(empty_policy)
    assert loaded.replicas == 0 and loaded.ttl_seconds_after_empty is None
    # A dynamic pool with the same disruption block keeps its emptiness TTL.
    dynamic = load_nodepool(
        nodepool_manifest(disruption={"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s"})
    )
    assert not dynamic.is_static and dynamic.ttl_seconds_after_empty == 30


def test_limits_nodes_is_a_count_on_static_and_dynamic_pools_and_v1alpha5() -> None:
    assert load_nodepool(nodepool_manifest(limits={"nodes": "10"})).limits.get(NODES) == 10
    assert load_nodepool(nodepool_manifest(replicas=2, limits={"nodes": 4})).limits.get(NODES) == 4
    zero = load_nodepool(nodepool_manifest(limits={"nodes": "0"}))
    assert NODES in zero.limited and zero.limits.get(NODES) == 0
    # v1alpha5's natural place for it: spec.limits.resources.
    v1alpha5 = load_provisioner(
        {"metadata": {"name": "p"}, "spec": {"limits": {"resources": {"nodes": "5"}}}}
    )
    assert v1alpha5.limits.get(NODES) == 5


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"replicas": -1}, ["spec.replicas: must be between 0 and 9223372036854775807"]),
        ({"replicas": "3"}, ["spec.replicas: Not a valid integer."]),
        (
            {"replicas": 2, "limits": {"cpu": "10", "nodes": "3"}},
            ["spec.limits: only 'limits.nodes' is supported on static NodePools"],
        ),
        ({"replicas": 2, "weight": 10}, ["spec.weight: 'weight' is not supported on static NodePools"]),
        ({"limits": {"nodes": "many"}}, None),
    ],
)
def test_bad_static_fields_are_refused_with_their_path(
    spec: dict[str, Any], expected: list[str] | None
) -> None:
    messages = refusals(load_nodepool, nodepool_manifest(**spec))
    if expected is None:
        assert messages and messages[0].startswith("spec.limits.nodes:"), messages
    else:
        assert messages == expected


def _karpy_manifest(obj: dict[str, Any]) -> dict[str, Any]:
    """Karpenter's test object with karpy's node class reference (karpy takes EC2NodeClasses only)."""
    obj = copy.deepcopy(obj)
    obj["spec"]["template"]["spec"]["nodeClassRef"] = dict(REF)
    return obj


STATIC_CASES = [
    c
    for c in NODEPOOL_CASES
    if any(word in c.name for word in ("replicas", "static", "compatible fields", "incompatible fields"))
]


def test_the_static_cases_are_karpenters_whole_set() -> None:
    # 3 replicas values, the negative one, 5 incompatible fields, the compatible ones, 4 updates.
    assert len(STATIC_CASES) >= 16, [c.name for c in STATIC_CASES]


@pytest.mark.parametrize("case", STATIC_CASES, ids=lambda c: c.name)
def test_karpenters_static_cel_cases_decide_the_same_in_the_webhook(case: Case) -> None:
    obj = _karpy_manifest(case.manifest())
    if not case.update:
        problems = validate_nodepool(obj)
    else:
        assert validate_nodepool(obj) == []  # the stored object is valid
        changed = copy.deepcopy(obj)
        for edit in case.update:
            edit(changed)
        problems = validate_nodepool(changed, obj)
    assert (problems == []) == case.stored, problems


def _review(operation: str, obj: dict[str, Any], old: dict[str, Any] | None) -> AdmissionRequest:
    return AdmissionRequest(
        uid="u",
        kind=GroupVersionKind("karpenter.sh", "v1", "NodePool"),
        operation=operation,
        object=obj,
        old_object=old,
    )


def test_the_webhook_refuses_a_transition_between_static_and_dynamic_only_on_update() -> None:
    static, dynamic = nodepool_manifest(replicas=3), nodepool_manifest()
    denied = admit_nodepool(_review("UPDATE", static, dynamic))
    assert not denied.allowed
    assert "spec.replicas: Cannot transition NodePool between static" in denied.message
    assert not admit_nodepool(_review("UPDATE", dynamic, static)).allowed
    assert admit_nodepool(_review("UPDATE", nodepool_manifest(replicas=5), static)).allowed
    # A create has no old object to compare with.
    assert admit_nodepool(_review("CREATE", static, None)).allowed
