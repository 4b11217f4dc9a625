"""Applying one of Karpenter's published examples through karpy's webhook, the way both example
tests (v1alpha5 and v1) check it: stored when nothing is expected, else refused with every expected
message start (the webhook's 403, or the CRD's own 422 naming `schema_field`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any


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
