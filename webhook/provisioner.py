"""Admission handlers for karpenter.sh Provisioners: defaulting (JSON Patch) and validation.

Both are thin: the rules live in extender.api (default_manifest, the marshmallow schema).
"""

from __future__ import annotations

from typing import Any

from extender.api import labels
from extender.api.provisioner_defaults import default_manifest
from extender.api.provisioner_schema import validate_provisioner
from webhook.admission import AdmissionRequest, Verdict, json_patch
from webhook.config import WebhookConfig

WRITES = ("CREATE", "UPDATE")


def _wrong_object(request: AdmissionRequest) -> Verdict | None:
    if request.kind.group != labels.GROUP or request.kind.kind != "Provisioner":
        return Verdict.deny(400, f"expected {labels.GROUP} Provisioner, got {request.kind}")
    obj: Any = request.object
    if not isinstance(obj, dict) or obj.get("kind") != "Provisioner":
        return Verdict.deny(400, "request.object is not a Provisioner")
    return None


def mutate(request: AdmissionRequest, config: WebhookConfig) -> Verdict:
    if request.operation not in WRITES or request.sub_resource:
        return Verdict()
    if (wrong := _wrong_object(request)) is not None:
        return wrong
    defaulted = default_manifest(
        request.object,
        cluster_name=config.cluster_name,
        cluster_endpoint=config.cluster_endpoint,
        instance_profile=config.default_instance_profile,
    )
    return Verdict(patch=json_patch(request.object, defaulted))


def validate(request: AdmissionRequest) -> Verdict:
    if request.operation not in WRITES or request.sub_resource:
        return Verdict()
    if (wrong := _wrong_object(request)) is not None:
        return wrong
    problems = validate_provisioner(request.object)
    return Verdict.refuse(problems)
