"""Karpenter's published v1 examples and the getting-started guide's NodePool
(tests/data/karpenter-examples/v1) applied unchanged on the local control plane with karpy's v1 CRDs
and its webhook (`karpy webhook --self-signed`, called by the real API server): each is stored, or
refused with the message naming what karpy does not support (one, windows-custom-userdata's
NodePool, is refused by the CRD itself, as Karpenter's CRD refuses it); what was stored loads, as the
controller loads it, into the NodePool's node configuration. Only metadata is touched: names get this
run's suffix (nodeClassRef.name the same) and the label routing them through the worker's shared
webhook (conftest's `admission_webhook`; its --default-instance-profile touches v1alpha5 kinds only)."""

from __future__ import annotations

import copy
import uuid
from typing import Any

import pytest

from extender.api.nodepool import duration_seconds
from extender.cluster.pool_resources import load_configured
from extender.settings import Settings
from tests.integration.examples_apply import ADMISSION_LABEL, ADMITTED, applied
from tests.integration.test_webhook import WebhookProcess
from tests.unit.api.test_karpenter_v1_examples import DOCS, expected_refusals

pytestmark = pytest.mark.integration

RUN = uuid.uuid4().hex[:8]
KINDS = {kind: ADMITTED[kind] for kind in ("NodePool", "EC2NodeClass")}
FILES = sorted({name for name, _ in DOCS})


def _as_applied(doc: dict[str, Any]) -> dict[str, Any]:
    obj = copy.deepcopy(doc)
    obj["metadata"]["name"] = f"{obj['metadata']['name']}-{RUN}"
    obj["metadata"].setdefault("labels", {}).update(ADMISSION_LABEL)
    if obj["kind"] == "NodePool":
        ref = obj["spec"]["template"]["spec"]["nodeClassRef"]
        ref["name"] = f"{ref['name']}-{RUN}"
    return obj


@pytest.mark.parametrize("name", FILES)
def test_v1_example_applies_or_is_refused_naming_the_field(
    admission_webhook: WebhookProcess, cluster: Any, name: str
) -> None:
    from kubernetes import client

    docs = sorted((d for n, d in DOCS if n == name), key=lambda d: d["kind"] != "EC2NodeClass")
    resources = {kind: (group, version, plural) for kind, (group, version, plural, _) in KINDS.items()}
    with cluster.api_client() as api:
        objects = client.CustomObjectsApi(api)
        # One is refused by the CRD itself: a version in nodeClassRef.group (Karpenter's too).
        with applied(
            objects,
            docs,
            resources,
            _as_applied,
            lambda doc: expected_refusals(name, doc),
            schema_field="nodeClassRef.group",
        ) as stored:
            # What the controller does with what was stored (CRD defaults applied by the API server).
            settings = Settings(cluster_name="demo")
            for pool in stored["NodePool"]:
                if not stored["EC2NodeClass"]:
                    continue  # its EC2NodeClass was refused: the controller skips it, saying why
                loaded = load_configured(pool, settings, node_classes=stored["EC2NodeClass"])
                assert loaded.kind == "NodePool" and loaded.provider.role
                expire = pool["spec"]["template"]["spec"]["expireAfter"]  # 720h unless the example sets it
                assert loaded.ttl_seconds_until_expired == duration_seconds(expire)
                assert pool["spec"]["disruption"]["budgets"]  # the CRD's default, as Karpenter's
