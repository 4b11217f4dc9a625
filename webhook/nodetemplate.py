"""Admission validation for karpenter.k8s.aws AWSNodeTemplates (what a Provisioner's providerRef names).

Validated with the defaults the controller applies when it loads one (selectors, the configured
instance profile), so a template that relies on them is accepted; nothing is written back.
"""

from __future__ import annotations

from typing import Any

from extender.api import nodeclass as nc
from extender.api.nodetemplate import default_node_template, validate_node_template
from webhook.admission import AdmissionRequest, Verdict
from webhook.config import WebhookConfig

WRITES = ("CREATE", "UPDATE")


def validate(request: AdmissionRequest, config: WebhookConfig) -> Verdict:
    if request.operation not in WRITES or request.sub_resource:
        return Verdict()
    obj: Any = request.object
    if request.kind.group != nc.API_GROUP or request.kind.kind != nc.KIND or not isinstance(obj, dict):
        return Verdict.deny(400, f"expected {nc.API_GROUP} {nc.KIND}, got {request.kind}")
    defaulted = default_node_template(
        obj,
        cluster_name=config.cluster_name,
        cluster_endpoint=config.cluster_endpoint,
        instance_profile=config.default_instance_profile,
    )
    problems = validate_node_template(defaulted)
    return Verdict.refuse(problems)
