"""Applying one of Karpenter's published examples through karpy's webhook, the way both example
tests (v1alpha5 and v1) check it: stored when nothing is expected, else refused with every expected
message start (the webhook's 403, or the CRD's own 422 naming `schema_field`)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

#: kind -> (group, version, plural, karpy's validating path): the objects karpy's webhook validates.
VALIDATED = {
    "NodePool": ("karpenter.sh", "v1", "nodepools", "/validate/nodepool"),
    "EC2NodeClass": ("karpenter.k8s.aws", "v1", "ec2nodeclasses", "/validate/ec2nodeclass"),
    "Provisioner": ("karpenter.sh", "v1alpha5", "provisioners", "/validate/provisioner"),
}
#: What the session's shared webhook (conftest's `admission_webhook`) validates: the above and the
#: AWSNodeTemplates a v1alpha5 Provisioner's providerRef names.
ADMITTED = VALIDATED | {
    "AWSNodeTemplate": ("karpenter.k8s.aws", "v1alpha1", "awsnodetemplates", "/validate/awsnodetemplate")
}
#: The label that routes an object through the shared webhook (one per worker: session fixtures are).
ADMISSION_LABEL = {"karpy.sh/admission-test": uuid.uuid4().hex[:8]}
#: The shared webhook's --default-instance-profile: Karpenter v0.31's getting-started install sets
#: one, and its published AWSNodeTemplates rely on it (none names an instanceProfile).
DEFAULT_PROFILE = "KarpenterNodeInstanceProfile-demo"


def create_or_refused(
    objects: Any,
    resource: tuple[str, str, str],
    obj: dict[str, Any],
    expected: Sequence[str],
    *,
    schema_field: str = "",
) -> dict[str, Any] | None:
    """The stored object, or None when it was refused as `expected` says."""
    from kubernetes.client.exceptions import ApiException

    group, version, plural = resource
    try:
        stored: dict[str, Any] = objects.create_cluster_custom_object(group, version, plural, obj)
    except ApiException as err:
        refused_by_schema = bool(schema_field) and err.status == 422
        assert (err.status == 403 or refused_by_schema) and expected, err.body
        message = json.loads(err.body)["message"]
        if refused_by_schema:
            assert schema_field in message, message
            return None
        assert "denied the request: " in message
        for start in expected:
            assert start in message, (start, message)
        return None
    assert not expected, f"{obj['kind']} stored, expected refusals {expected}"
    return stored


@contextmanager
def applied(
    objects: Any,
    docs: Sequence[dict[str, Any]],
    resources: Mapping[str, tuple[str, str, str]],
    as_applied: Callable[[dict[str, Any]], dict[str, Any]],
    expected: Callable[[dict[str, Any]], Sequence[str]],
    *,
    schema_field: str = "",
) -> Iterator[dict[str, list[dict[str, Any]]]]:
    """Create each doc (in order) as `create_or_refused` does; yields kind -> the stored objects,
    and deletes them again, newest first, on leaving."""
    created: list[tuple[str, str]] = []
    stored: dict[str, list[dict[str, Any]]] = {kind: [] for kind in resources}
    try:
        for doc in docs:
            resource = resources[doc["kind"]]
            obj = create_or_refused(
                objects, resource, as_applied(doc), expected(doc), schema_field=schema_field
            )
            if obj is not None:
                created.append((doc["kind"], obj["metadata"]["name"]))
                stored[doc["kind"]].append(obj)
        yield stored
    finally:
        for kind, name in reversed(created):
            objects.delete_cluster_custom_object(*resources[kind], name)


def example_hook(
    name: str, url: str, resource: tuple[str, str, str], run_label: dict[str, str]
) -> dict[str, Any]:
    """A webhook on CREATE of `resource` (group, version, plural), only for this run's objects."""
    group, version, plural = resource
    return {
        "name": name,
        "admissionReviewVersions": ["v1"],
        "clientConfig": {"url": url},
        "sideEffects": "None",
        "failurePolicy": "Fail",
        "timeoutSeconds": 10,
        "objectSelector": {"matchLabels": run_label},
        "rules": [
            {"apiGroups": [group], "apiVersions": [version], "resources": [plural], "operations": ["CREATE"]}
        ],
    }
