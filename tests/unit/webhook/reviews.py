"""AdmissionReview and manifest builders shared by the webhook unit tests."""

from __future__ import annotations

import base64
import json
from typing import Any

from hypothesis import HealthCheck, settings

from extender.api.provisioner import Provisioner
from extender.api.provisioner_schema import load_provisioner
from tests import builders


def provisioner_manifest(name: str = "default", **spec: Any) -> dict[str, Any]:
    """A Provisioner whose spec is `spec` exactly as written (fuzzed specs included)."""
    return builders.provisioner_manifest(name) | {"spec": spec}


def valid_spec() -> dict[str, Any]:
    return {
        "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}],
        "provider": {
            "instanceProfile": "KarpenterNodeInstanceProfile-demo",
            "subnetSelector": {"kubernetes.io/cluster/demo": "*"},
            "securityGroupSelector": {"kubernetes.io/cluster/demo": "*"},
            "cluster": {"name": "demo", "endpoint": "https://127.0.0.1:6443"},
        },
        "ttlSecondsAfterEmpty": 30,
    }


def pod_manifest(name: str = "web", **spec: Any) -> dict[str, Any]:
    return builders.pod_manifest(name, namespace="apps", uid="", image="nginx", cpu="1", **spec)


def make_review(
    obj: Any,
    *,
    group: str = "karpenter.sh",
    version: str = "v1alpha5",
    kind: str = "Provisioner",
    operation: str = "CREATE",
    namespace: str = "",
    uid: str = "705ab4f5-6393-11e8-b7cc-42010a800002",
) -> dict[str, Any]:
    request: dict[str, Any] = {
        "uid": uid,
        "kind": {"group": group, "version": version, "kind": kind},
        "operation": operation,
        "object": obj,
        "oldObject": None,
        "dryRun": False,
    }
    if namespace:
        request["namespace"] = namespace
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def pod_review(obj: Any, *, namespace: str = "apps", operation: str = "CREATE") -> dict[str, Any]:
    return make_review(obj, group="", version="v1", kind="Pod", namespace=namespace, operation=operation)


def decoded_patch(response: dict[str, Any]) -> list[dict[str, Any]]:
    assert response["patchType"] == "JSONPatch"
    return json.loads(base64.b64decode(response["patch"]))


def loaded(name: str, **spec: Any) -> Provisioner:
    return load_provisioner(provisioner_manifest(name, **spec))


def field_paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path (keys and indexes) into decoded JSON, the root's `()` included."""
    found = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            found += field_paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found += field_paths(value, (*prefix, i))
    return found


def fuzz(examples: int) -> settings:
    """Hypothesis settings for the fuzz tests: reproducible, no deadline, no example database."""
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
