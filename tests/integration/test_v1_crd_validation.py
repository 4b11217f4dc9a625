"""karpy's v1 CRDs (manifests/crd/nodepools.karpenter.sh.yaml, ec2nodeclasses.karpenter.k8s.aws.yaml)
validate as Karpenter's: every case of Karpenter's own CEL/validation tests (tests/integration/
v1_cel_cases.py names each by its source file and `It`/`Entry` text) is refused or stored by the
local control plane's kube-apiserver exactly as Karpenter's test expects. The CRDs alone decide
here (no webhook), so this proves the schema, its defaults and the CEL rules themselves.

Creates are server-side dry runs (validated and defaulted, never stored), so the ~300 cases run
as fast as the API server answers; update cases store an object, update it (dry run), delete it.
"""

from __future__ import annotations

import copy
import uuid
from typing import Any

import pytest

from hack.localcluster.karpyenv import V1_CRDS, install_crd
from tests.integration.v1_cel_cases import CASES, NODECLASS_CASES, NODEPOOL_CASES, Case

pytestmark = pytest.mark.integration

RUN = uuid.uuid4().hex[:8]
KINDS = {"NP": ("karpenter.sh", "v1", "nodepools"), "NC": ("karpenter.k8s.aws", "v1", "ec2nodeclasses")}


@pytest.fixture(scope="module")
def objects(cluster: Any) -> Any:
    from kubernetes import client

    with cluster.api_client() as api:
        for path in V1_CRDS:
            install_crd(api, path)
        yield client.CustomObjectsApi(api)


def _outcome(objects: Any, case: Case, index: int) -> tuple[bool, str]:
    """(stored?, the API server's message) for one case."""
    from kubernetes.client.exceptions import ApiException

    group, version, plural = KINDS[case.source]
    obj = case.manifest()
    obj["metadata"]["name"] = f"cel-{RUN}-{index}"
    try:
        if not case.update:
            objects.create_cluster_custom_object(group, version, plural, obj, dry_run="All")
            return True, ""
        stored = objects.create_cluster_custom_object(group, version, plural, obj)
        try:
            changed = copy.deepcopy(stored)
            for edit in case.update:
                edit(changed)
            objects.replace_cluster_custom_object(
                group, version, plural, obj["metadata"]["name"], changed, dry_run="All"
            )
            return True, ""
        finally:
            objects.delete_cluster_custom_object(group, version, plural, obj["metadata"]["name"])
    except ApiException as err:
        if err.status not in (400, 422):
            raise
        return False, str(err.body)[:300]


def test_every_karpenter_case_is_stored_or_refused_as_karpenter_expects(objects: Any) -> None:
    wrong = []
    for index, case in enumerate(CASES):
        stored, message = _outcome(objects, case, index)
        if stored != case.stored:
            expected = "stored" if case.stored else "refused"
            wrong.append(f"{case.source}: {case.name!r}: expected {expected}, got {message or 'stored'}")
    assert not wrong, "\n".join(wrong)
    # The tables are Karpenter's whole suites, not a sample.
    assert len(NODEPOOL_CASES) >= 100 and len(NODECLASS_CASES) >= 150


def test_defaults_are_karpenters(objects: Any) -> None:
    """The CRD defaults a minimal NodePool and EC2NodeClass as Karpenter v1 does (API server)."""
    group, version, plural = KINDS["NP"]
    pool = copy.deepcopy(CASES[0].manifest())
    pool["metadata"]["name"] = f"defaults-{RUN}"
    pool["spec"]["template"]["spec"].pop("expireAfter")
    pool["spec"].pop("disruption")
    created = objects.create_cluster_custom_object(group, version, plural, pool, dry_run="All")
    assert created["spec"]["disruption"] == {
        "budgets": [{"nodes": "10%"}],
        "consolidateAfter": "0s",
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
    }
    assert created["spec"]["template"]["spec"]["expireAfter"] == "720h"
    group, version, plural = KINDS["NC"]
    klass = NODECLASS_CASES[0].manifest()
    klass["metadata"]["name"] = f"defaults-{RUN}"
    created = objects.create_cluster_custom_object(group, version, plural, klass, dry_run="All")
    assert created["spec"]["metadataOptions"] == {
        "httpEndpoint": "enabled",
        "httpProtocolIPv6": "disabled",
        "httpPutResponseHopLimit": 1,
        "httpTokens": "required",
    }
