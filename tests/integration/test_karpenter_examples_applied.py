"""Karpenter's published v1alpha5 examples (tests/data/karpenter-examples, v0.10-v0.31) applied on
the local control plane, through karpy's webhook (`karpy webhook --self-signed`, called by the real
API server): each is stored, or refused with the message naming the field karpy does not support;
a stored Provisioner's providerRef resolves, as the controller loads it, to the AWSNodeTemplate's
node configuration. Only metadata is touched: names get this run's suffix (and providerRef the same)
and the label that routes them through the worker's shared webhook (conftest's `admission_webhook`,
started with Karpenter v0.31's default instance profile); every spec is as published."""

from __future__ import annotations

import copy
import uuid
from typing import Any

import pytest
from marshmallow import ValidationError

from extender.api import nodeclass as nc
from extender.cluster.pool_resources import load_configured
from extender.settings import AWSSettings, Settings
from tests.integration.examples_apply import ADMISSION_LABEL, ADMITTED, DEFAULT_PROFILE, applied
from tests.integration.test_webhook import WebhookProcess
from tests.unit.api.test_karpenter_examples import DOCS, expected_refusals

pytestmark = pytest.mark.integration

RUN = uuid.uuid4().hex[:8]
KINDS = {kind: ADMITTED[kind][:3] for kind in ("Provisioner", "AWSNodeTemplate")}
FILES = sorted({name for name, _ in DOCS})


def _as_applied(doc: dict[str, Any]) -> dict[str, Any]:
    """The example with this run's name suffix and the shared webhook's label (metadata only)."""
    obj = copy.deepcopy(doc)
    obj["metadata"]["name"] = f"{obj['metadata']['name']}-{RUN}"
    obj["metadata"].setdefault("labels", {}).update(ADMISSION_LABEL)
    if ref := obj["spec"].get("providerRef"):
        ref["name"] = f"{ref['name']}-{RUN}"
    return obj


@pytest.mark.parametrize("name", FILES)
def test_example_applies_or_is_refused_naming_the_field(
    admission_webhook: WebhookProcess, cluster: Any, name: str
) -> None:
    from kubernetes import client

    docs = sorted((d for n, d in DOCS if n == name), key=lambda d: d["kind"] != "AWSNodeTemplate")
    with cluster.api_client() as api:
        objects = client.CustomObjectsApi(api)
        with applied(objects, docs, KINDS, _as_applied, lambda doc: expected_refusals(name, doc)) as stored:
            # What the controller does with what was stored: resolve providerRef, read the family.
            aws = AWSSettings(default_instance_profile=DEFAULT_PROFILE)
            settings = Settings(cluster_name="demo", aws=aws)
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
