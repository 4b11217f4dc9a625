"""Karpenter's published v1alpha5 examples (tests/data/karpenter-examples, v0.10-v0.31) applied on
the local control plane, through karpy's webhook (`karpy webhook --self-signed`, called by the real
API server): each is stored, or refused with the message naming the field karpy does not support;
a stored Provisioner's providerRef resolves, as the controller loads it, to the AWSNodeTemplate's
node configuration. Only metadata is touched: names get this run's suffix (and providerRef the same)
and a label that routes them to this run's webhook configurations; every spec is as published."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from marshmallow import ValidationError

from extender.api import nodeclass as nc
from extender.cluster.pool_resources import load_configured
from extender.settings import AWSSettings, Settings
from hack.localcluster.karpyenv import install_provisioner_crd
from tests.integration.examples_apply import applied, example_hook
from tests.integration.test_webhook import WebhookProcess, configuration
from tests.unit.api.test_karpenter_examples import DOCS, expected_refusals

pytestmark = pytest.mark.integration

RUN = uuid.uuid4().hex[:8]
CONFIG_NAME = f"karpy-examples-test-{RUN}"
RUN_LABEL = {"karpy.sh/examples-test": RUN}
PROFILE = "KarpenterNodeInstanceProfile-demo"
KINDS = {
    "Provisioner": ("karpenter.sh", "v1alpha5", "provisioners"),
    "AWSNodeTemplate": ("karpenter.k8s.aws", "v1alpha1", "awsnodetemplates"),
}
FILES = sorted({name for name, _ in DOCS})


def _hook(name: str, url: str, kind: str) -> dict[str, Any]:
    return example_hook(name, url, KINDS[kind], RUN_LABEL)


@pytest.fixture(scope="module")
def webhook(cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebhookProcess]:
    from kubernetes import client

    api_client = cluster.api_client()
    install_provisioner_crd(api_client)  # and the AWSNodeTemplate CRD
    process = WebhookProcess(
        cluster.kubeconfig,
        tmp_path_factory.mktemp("examples-webhook"),
        config_name=CONFIG_NAME,
        extra_args=("--default-instance-profile", PROFILE),
    )
    admission = client.AdmissionregistrationV1Api(api_client)
    admission.create_mutating_webhook_configuration(
        configuration(
            "Mutating",
            CONFIG_NAME,
            [
                _hook(
                    "defaulting.webhook.provisioners.karpenter.sh",
                    process.url("/mutate/provisioner"),
                    "Provisioner",
                )
            ],
        )
    )
    admission.create_validating_webhook_configuration(
        configuration(
            "Validating",
            CONFIG_NAME,
            [
                _hook(
                    "validation.webhook.provisioners.karpenter.sh",
                    process.url("/validate/provisioner"),
                    "Provisioner",
                ),
                _hook(
                    "validation.webhook.awsnodetemplates.karpenter.k8s.aws",
                    process.url("/validate/awsnodetemplate"),
                    "AWSNodeTemplate",
                ),
            ],
        )
    )
    try:
        process.start()
        yield process
    finally:
        process.stop()
        admission.delete_mutating_webhook_configuration(CONFIG_NAME)
        admission.delete_validating_webhook_configuration(CONFIG_NAME)
        api_client.close()


def _as_applied(doc: dict[str, Any]) -> dict[str, Any]:
    """The example with this run's name suffix and label (metadata only)."""
    obj = copy.deepcopy(doc)
    obj["metadata"]["name"] = f"{obj['metadata']['name']}-{RUN}"
    obj["metadata"].setdefault("labels", {}).update(RUN_LABEL)
    if ref := obj["spec"].get("providerRef"):
        ref["name"] = f"{ref['name']}-{RUN}"
    return obj


@pytest.mark.parametrize("name", FILES)
def test_example_applies_or_is_refused_naming_the_field(
    webhook: WebhookProcess, cluster: Any, name: str
) -> None:
    from kubernetes import client

    docs = sorted((d for n, d in DOCS if n == name), key=lambda d: d["kind"] != "AWSNodeTemplate")
    with cluster.api_client() as api:
        objects = client.CustomObjectsApi(api)
        with applied(objects, docs, KINDS, _as_applied, lambda doc: expected_refusals(name, doc)) as stored:
            # What the controller does with what was stored: resolve providerRef, read the family.
            settings = Settings(cluster_name="demo", aws=AWSSettings(default_instance_profile=PROFILE))
            for prov in stored["Provisioner"]:
                if (ref := prov["spec"].get("providerRef")) and not stored["AWSNodeTemplate"]:
                    # Its template was refused (Windows): the controller skips it, saying why.
                    with pytest.raises(ValidationError) as refused:
                        load_configured(prov, settings, [])
                    assert refused.value.messages == [
                        f'spec.providerRef.name: AWSNodeTemplate "{ref["name"]}" not found'
                    ]
                    continue
                loaded = load_configured(prov, settings, stored["AWSNodeTemplate"])
                (template,) = stored["AWSNodeTemplate"] or [{"spec": prov["spec"].get("provider") or {}}]
                assert loaded.provider.family == (template["spec"].get("amiFamily") or nc.DEFAULT_AMI_FAMILY)
