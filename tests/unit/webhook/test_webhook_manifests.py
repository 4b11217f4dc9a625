"""The shipped manifests agree with the code: CRD fields, webhook paths, failure policies, RBAC verbs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from extender.api.provisioner_schema import SpecSchema
from webhook.app import create_app
from webhook.config import WebhookConfig

ROOT = Path(__file__).resolve().parents[3] / "manifests"


def docs(path: str) -> list[dict[str, Any]]:
    return list(yaml.safe_load_all((ROOT / path).read_text()))


def test_crd_declares_every_spec_field_the_schema_reads() -> None:
    (crd,) = docs("crd/provisioners.karpenter.sh.yaml")
    assert crd["spec"]["scope"] == "Cluster"
    (version,) = crd["spec"]["versions"]
    assert version["name"] == "v1alpha5" and version["subresources"] == {"status": {}}
    props = version["schema"]["openAPIV3Schema"]["properties"]
    assert set(props["spec"]["properties"]) == set(SpecSchema().fields)
    assert props["spec"]["properties"]["provider"]["x-kubernetes-preserve-unknown-fields"] is True
    assert set(props["status"]["properties"]) == {"resources", "lastScaleTime", "conditions"}
    assert [c["name"] for c in version["additionalPrinterColumns"]][-1] == "Age"


def test_webhook_paths_exist_and_policies_match_the_issue() -> None:
    routes = {rule.rule for rule in create_app(WebhookConfig(read_provisioners=False)).url_map.iter_rules()}
    hooks = [hook for doc in docs("webhook/webhooks.yaml") for hook in doc["webhooks"]]
    for hook in hooks:
        assert hook["clientConfig"]["service"]["path"] in routes
        assert hook["sideEffects"] == "None" and hook["admissionReviewVersions"] == ["v1"]
    policies = {hook["name"]: hook["failurePolicy"] for hook in hooks}
    assert policies == {
        "defaulting.webhook.provisioners.karpenter.sh": "Fail",
        "validation.webhook.provisioners.karpenter.sh": "Fail",
        "validation.webhook.awsnodetemplates.karpenter.k8s.aws": "Fail",
        "validation.webhook.nodepools.karpenter.sh": "Fail",
        "validation.webhook.nodeoverlays.karpenter.sh": "Fail",
        "validation.webhook.ec2nodeclasses.karpenter.k8s.aws": "Fail",
        "defaulting.webhook.pods.karpy.sh": "Ignore",
    }
    (pods,) = [h for h in hooks if h["name"] == "defaulting.webhook.pods.karpy.sh"]
    assert pods["timeoutSeconds"] <= 5
    assert pods["namespaceSelector"]["matchLabels"] == {"karpenter.sh/provisioning": "enabled"}
    assert pods["namespaceSelector"]["matchExpressions"][0]["values"] == ["kube-system", "karpy"]


def test_deployment_and_rbac() -> None:
    (deployment,) = docs("webhook/deployment.yaml")
    assert deployment["spec"]["replicas"] == 2
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--self-signed" in args and "--cert-secret=karpy-webhook-cert" in args
    (pdb,) = docs("webhook/pdb.yaml")
    assert pdb["spec"]["minAvailable"] == 1
    verbs = {
        (rule["resources"][0], tuple(rule["verbs"]))
        for doc in docs("webhook/rbac.yaml")
        if doc["kind"] in ("ClusterRole", "Role")
        for rule in doc["rules"]
    }
    assert verbs == {
        ("provisioners", ("list",)),
        ("mutatingwebhookconfigurations", ("get", "patch")),
        ("secrets", ("get", "update")),  # update: certificate rotation (issue 13)
        ("secrets", ("create",)),
    }
