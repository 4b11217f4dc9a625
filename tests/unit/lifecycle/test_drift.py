"""Drift: which Provisioner changes drift a node (the node-shaping hash), requirement and AMI drift,
and marking a drifted node once (annotation, Event, metric)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from extender.api import labels as wk
from extender.api.node import Node
from extender.api.nodeclass import AMI_ID_ANNOTATION
from extender.api.provisioner_hash import HASH_VERSION, hash_annotations, provisioner_hash
from extender.cloud.types import CloudError
from extender.lifecycle import drift, metrics
from extender.lifecycle.context import Context
from extender.lifecycle.events import Recorder
from extender.settings import Settings
from tests.unit.scheduling.builders import catalog, make_provisioner

BASE: dict[str, Any] = {
    "requirements": [{"key": wk.INSTANCE_TYPE, "operator": "In", "values": ["m5.large", "c5.large"]}],
    "labels": {"team": "a"},
    "taints": [{"key": "dedicated", "value": "a", "effect": "NoSchedule"}],
    "provider": {"instanceProfile": "node", "subnetSelector": {"k": "v"}, "tags": {"cost": "1"}},
}


def prov(**changes: Any) -> Any:
    return make_provisioner("p", **{**BASE, **changes})


def node_of(provisioner: Any, *, itype: str = "m5.large", ami: str = "ami-1", **annotations: str) -> Node:
    return Node(
        name="n1",
        labels={
            wk.PROVISIONER_NAME: provisioner.name,
            wk.INSTANCE_TYPE: itype,
            "team": "a",
        },
        annotations={
            **hash_annotations(provisioner),
            **({AMI_ID_ANNOTATION: ami} if ami else {}),
            **annotations,
        },
    )


@pytest.mark.parametrize(
    "change",
    [
        {"limits": {"resources": {"cpu": "10"}}},
        {"weight": 50},
        {"ttlSecondsUntilExpired": 600},
        {"ttlSecondsAfterEmpty": 30},
        {"disruption": {"nodes": "1"}},
        {"provider": {**BASE["provider"], "subnetSelector": {"other": "x"}}},
        {"provider": {**BASE["provider"], "securityGroupSelector": {"sg": "x"}}},
        # requirements are checked against the node's labels, not hashed
        {"requirements": [{"key": wk.INSTANCE_TYPE, "operator": "In", "values": ["m5.large"]}]},
    ],
)
def test_fields_that_do_not_shape_the_node_keep_the_hash(change: dict[str, Any]) -> None:
    assert provisioner_hash(prov(**change)) == provisioner_hash(prov())


@pytest.mark.parametrize(
    "change",
    [
        {"labels": {"team": "b"}},
        {"taints": []},
        {"kubeletConfiguration": {"maxPods": 20}},
        {"kubeletConfiguration": {"clusterDNS": ["10.0.0.10"]}},
        {"provider": {**BASE["provider"], "tags": {"cost": "2"}}},
        {"provider": {**BASE["provider"], "instanceProfile": "other"}},
        {"provider": {**BASE["provider"], "amiFamily": "Bottlerocket"}},
    ],
)
def test_node_shaping_fields_change_the_hash(change: dict[str, Any]) -> None:
    assert provisioner_hash(prov(**change)) != provisioner_hash(prov())


def test_drift_reasons() -> None:
    p = prov()
    assert drift.drift_reason(node_of(p), p, "ami-1") is None
    assert drift.drift_reason(node_of(p), prov(labels={"team": "b"}), "ami-1") == "ProvisionerDrifted"
    # A node stamped under another hash version is not compared by hash.
    old = node_of(p, **{wk.PROVISIONER_HASH_VERSION_ANNOTATION: "v0"})
    assert HASH_VERSION != "v0" and drift.drift_reason(old, prov(labels={"team": "b"}), "ami-1") is None
    narrowed = prov(requirements=[{"key": wk.INSTANCE_TYPE, "operator": "In", "values": ["c5.large"]}])
    assert drift.drift_reason(node_of(p), narrowed, "ami-1") == "RequirementsDrifted"
    assert drift.drift_reason(node_of(p), p, "ami-2") == "AMIDrift"
    # Unknown current AMI (custom launch template) or no record of the launched one: no AMI drift.
    assert drift.drift_reason(node_of(p), p, None) is None
    assert drift.drift_reason(node_of(p, ami=""), p, "ami-2") is None


def test_a_nodepool_drifts_and_is_named_as_karpenter_v1_names_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """Karpenter v1's reason for a changed node template is `NodePoolDrifted` (sigs.k8s.io/karpenter
    pkg/controllers/nodeclaim/disruption/drift.go), and its logs name the nodepool."""
    p = replace(prov(), kind="NodePool")
    changed = replace(prov(labels={"team": "b"}), kind="NodePool")
    assert drift.drift_reason(node_of(p), changed, "ami-1") == "NodePoolDrifted"
    monkeypatch.setattr(drift.nodepatch, "set_annotation", lambda *_: None)
    messages: list[str] = []
    recorder = Recorder(None)
    monkeypatch.setattr(recorder, "node", lambda node, reason, message, **_: messages.append(message))
    ctx = Context(Settings(), None, Cloud("ami-1"), None, None, recorder)  # type: ignore[arg-type]
    assert drift.check(ctx, node_of(p), changed) == "NodePoolDrifted"
    assert messages == ["Marked node n1 drifted, NodePoolDrifted (nodepool p)"]


class Cloud:
    def __init__(self, image: str | None) -> None:
        self.image = image

    def get_instance_types(self, provisioner: Any) -> list[Any]:
        return [next(t for t in catalog() if t.name == "m5.large")]

    def image_id(self, provisioner: Any, instance_type: Any) -> str:
        if self.image is None:
            raise CloudError("no AMI")
        return self.image


def test_a_drifted_node_is_marked_once(monkeypatch: pytest.MonkeyPatch) -> None:
    patched: list[tuple[str, str, str | None]] = []
    monkeypatch.setattr(drift.nodepatch, "set_annotation", lambda _, n, k, v: patched.append((n, k, v)))
    events: list[str] = []
    recorder = Recorder(None)
    monkeypatch.setattr(recorder, "node", lambda node, reason, message, **_: events.append(reason))
    ctx = Context(Settings(), None, Cloud("ami-2"), None, None, recorder)  # type: ignore[arg-type]
    p = prov()
    before = metrics.NODES_DRIFTED.labels(reason="AMIDrift")._value.get()
    assert drift.check(ctx, node_of(p), p) == "AMIDrift"
    assert patched == [("n1", wk.VOLUNTARY_DISRUPTION_ANNOTATION, "drifted")] and events == ["Drifted"]
    assert metrics.NODES_DRIFTED.labels(reason="AMIDrift")._value.get() == before + 1
    marked = node_of(p, **{wk.VOLUNTARY_DISRUPTION_ANNOTATION: "drifted"})
    assert drift.check(ctx, marked, p) == "AMIDrift" and len(patched) == 1 and len(events) == 1
    # The AMI published back: the node is no longer drifted and loses the mark.
    ctx.cloud = Cloud("ami-1")  # type: ignore[assignment]
    assert drift.check(ctx, marked, p) is None
    assert patched[-1] == ("n1", wk.VOLUNTARY_DISRUPTION_ANNOTATION, None)


def test_a_node_without_the_current_hash_version_is_stamped_not_drifted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    patched: dict[str, str | None] = {}
    monkeypatch.setattr(drift.nodepatch, "set_annotation", lambda _, n, k, v: patched.__setitem__(k, v))
    ctx = Context(Settings(), None, Cloud(None), None, None, Recorder(None))  # type: ignore[arg-type]
    bare = Node(name="n1", labels={wk.PROVISIONER_NAME: "p", wk.INSTANCE_TYPE: "m5.large", "team": "a"})
    changed = prov(labels={"team": "a", "tier": "x"})
    assert drift.check(ctx, bare, changed) is None
    assert patched == hash_annotations(changed)
