"""Admission validation for the v1 API: karpenter.sh NodePools and NodeOverlays (v1alpha1), and
karpenter.k8s.aws EC2NodeClasses.

Karpenter v1's own rules are the CRDs' (schema, defaults, CEL), evaluated by the API server before
this webhook is called; what is left here is karpy's part: refusing, by field, what karpy does not
implement, so a stored NodePool, NodeOverlay or EC2NodeClass is one karpy honours exactly as
written. Nothing is written back.
"""

from __future__ import annotations

from typing import Any

from extender.api import ec2nodeclass, nodeoverlay, nodepool
from webhook.admission import AdmissionRequest, Verdict
from webhook.config import WebhookConfig

WRITES = ("CREATE", "UPDATE")


def _wrong(request: AdmissionRequest, group: str, kind: str) -> Verdict | None:
    if request.kind.group != group or request.kind.kind != kind or not isinstance(request.object, dict):
        return Verdict.deny(400, f"expected {group} {kind}, got {request.kind}")
    return None


def validate_nodepool(request: AdmissionRequest) -> Verdict:
    if request.operation not in WRITES or request.sub_resource:
        return Verdict()
    if (wrong := _wrong(request, nodepool.API_VERSION.split("/")[0], nodepool.KIND)) is not None:
        return wrong
    old = request.old_object if request.operation == "UPDATE" else None
    problems = nodepool.validate_nodepool(request.object, old)
    return Verdict.refuse(problems)


def validate_ec2nodeclass(request: AdmissionRequest, config: WebhookConfig) -> Verdict:
    if request.operation not in WRITES or request.sub_resource:
        return Verdict()
    if (wrong := _wrong(request, ec2nodeclass.API_GROUP, ec2nodeclass.KIND)) is not None:
        return wrong
    obj: Any = request.object
    problems = ec2nodeclass.validate_ec2nodeclass(obj, cluster_name=config.cluster_name or "my-cluster")
    return Verdict.refuse(problems)


def validate_nodeoverlay(request: AdmissionRequest) -> Verdict:
    if request.operation not in WRITES or request.sub_resource:
        return Verdict()
    if (wrong := _wrong(request, nodeoverlay.GROUP, nodeoverlay.KIND)) is not None:
        return wrong
    return Verdict.refuse(nodeoverlay.validate_nodeoverlay(request.object))
