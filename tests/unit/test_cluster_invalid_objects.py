"""Issue 31: an invalid NodePool was logged at ERROR on every listing (21 times each in the probe);
now once per resourceVersion and error, with one Warning Event, and counted while it lasts. The
status pass marks any object that does not load, whatever it raises, and keeps the condition the
launch backoff writes."""

from __future__ import annotations

import copy
import logging
from typing import Any

import pytest
from prometheus_client import REGISTRY

from extender.api.provisioner import Provisioner
from extender.cluster import events, v1status
from extender.cluster import pool_resources as kube_provisioners
from extender.settings import Settings
from tests import builders

NODE_CLASS = {
    "apiVersion": "karpenter.k8s.aws/v1",
    "kind": "EC2NodeClass",
    "metadata": {"name": "default", "resourceVersion": "1"},
    "spec": {
        "role": "r",
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "subnetSelectorTerms": [{"tags": {"a": "b"}}],
        "securityGroupSelectorTerms": [{"tags": {"a": "b"}}],
    },
}


def nodepool(name: str, version: str = "1", **template_spec: Any) -> dict[str, Any]:
    spec = {"requirements": [], "nodeClassRef": dict(builders.NODE_CLASS_REF), **template_spec}
    return builders.nodepool_manifest(name, resource_version=version, uid=f"uid-{name}", template_spec=spec)


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    objects: dict[str, Any] = {"nodepools": [], "ec2nodeclasses": [NODE_CLASS], "events": []}
    monkeypatch.setattr(
        kube_provisioners, "list_custom", lambda _kube, _g, _v, plural: copy.deepcopy(objects[plural])
    )
    monkeypatch.setattr(events, "record", lambda _kube, **kw: objects["events"].append(kw))
    for quarantine in getattr(kube_provisioners, "INVALID", {}).values():  # fresh per test
        quarantine.retain(set())
    return objects


def unhandled(kind: str) -> float:
    return REGISTRY.get_sample_value("karpy_unhandled_objects", {"kind": kind}) or 0.0


def test_an_invalid_nodepool_is_reported_once_per_change(cluster, caplog) -> None:
    cluster["nodepools"] = [nodepool("good"), nodepool("bad", taints="not a list")]
    caplog.set_level(logging.DEBUG, "karpy.provisioners")
    for _ in range(21):
        loaded = kube_provisioners.list_nodepools(object(), cluster_name="c")
        assert [p.name for p in loaded] == ["good"]
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and "Ignoring invalid nodepool bad" in errors[0].message
    assert "spec.template.spec.taints" in errors[0].message
    assert [(e["kind"], e["name"], e["reason"]) for e in cluster["events"]] == [
        ("NodePool", "bad", "ValidationFailed")
    ]
    assert cluster["events"][0]["api_version"] == "karpenter.sh/v1"
    assert unhandled("NodePool") == 1
    # Edited (new resourceVersion), still invalid: news again. Fixed: no longer counted.
    cluster["nodepools"][1] = nodepool("bad", version="2", taints="still not")
    kube_provisioners.list_nodepools(object(), cluster_name="c")
    assert len([r for r in caplog.records if r.levelname == "ERROR"]) == 2
    cluster["nodepools"][1] = nodepool("bad", version="3")
    assert [p.name for p in kube_provisioners.list_nodepools(object(), cluster_name="c")] == ["good", "bad"]
    assert unhandled("NodePool") == 0


def test_an_error_message_megabytes_long_is_cut_in_the_log(cluster, caplog) -> None:
    # 20,000 bad taints: the schema's messages run to about 2 million characters.
    cluster["nodepools"] = [nodepool("huge", taints=[{"key": "k", "effect": "Bad"}] * 20_000)]
    kube_provisioners.list_nodepools(object(), cluster_name="c")
    (error,) = [r for r in caplog.records if r.levelname == "ERROR"]
    assert len(error.getMessage()) < 1200


def test_the_status_pass_marks_an_object_that_raises_anything(monkeypatch) -> None:
    def explode(_obj: Any) -> Any:
        raise OverflowError("Python int too large to convert to C int")

    monkeypatch.setattr(v1status, "parse_nodepool", explode)
    status = v1status.nodepool_status(nodepool("p"), {}, v1status.Resources(), 0, "now")
    (ready,) = status["conditions"]
    assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "False", "ValidationFailed")
    assert "too large" in ready["message"]
    monkeypatch.setattr(v1status, "load_ec2nodeclass", lambda *_a, **_k: explode(None))
    node_class_status, ok = v1status.node_class_status(NODE_CLASS, lambda _c: {}, Settings(), "now")
    assert not ok and node_class_status["conditions"][0]["reason"] == "ValidationFailed"


def test_the_status_pass_keeps_the_launch_backoffs_condition() -> None:
    old = [
        {"type": "Ready", "status": "True", "lastTransitionTime": "t0"},
        {"type": "NodeRegistrationHealthy", "status": "False", "reason": "LaunchFailed"},
        {"type": "SomethingStale", "status": "False"},
    ]
    new = [v1status.condition("Ready", True, "", "", "t1", 1)]
    kept = v1status._keep_times(old, new)
    assert [c["type"] for c in kept] == ["Ready", "NodeRegistrationHealthy"]
    assert kept[0]["lastTransitionTime"] == "t0"


def test_a_nodepool_named_as_a_provisioner_is_reported_once(caplog) -> None:
    legacy, pool = Provisioner(name="same"), Provisioner(name="same", kind="NodePool", resource_version="4")
    for _ in range(5):
        assert kube_provisioners.without_clashes([legacy], [pool]) == [legacy]
    clashes = [r for r in caplog.records if r.levelname == "ERROR" and "same name" in r.getMessage()]
    assert len(clashes) == 1


def test_a_nodepool_of_an_invalid_node_class_says_the_class_is_invalid(cluster, caplog) -> None:
    """The probe's log read `EC2NodeClass "np-tags-…" not found` for a class that exists and is
    merely invalid (60 tags); the NodePool's refusal now says which it is."""
    tagged = copy.deepcopy(NODE_CLASS)
    tagged["metadata"]["name"] = "tagged"
    tagged["spec"]["tags"] = {f"team-{i}": "x" for i in range(60)}
    cluster["ec2nodeclasses"] = [NODE_CLASS, tagged]
    uses_tagged, uses_missing = nodepool("uses-tagged"), nodepool("uses-missing")
    uses_tagged["spec"]["template"]["spec"]["nodeClassRef"]["name"] = "tagged"
    uses_missing["spec"]["template"]["spec"]["nodeClassRef"]["name"] = "missing"
    cluster["nodepools"] = [nodepool("good"), uses_tagged, uses_missing]
    loaded = kube_provisioners.list_nodepools(object(), cluster_name="c")
    assert [p.name for p in loaded] == ["good"]
    errors = {r.getMessage().split(",")[0]: r.getMessage() for r in caplog.records if r.levelname == "ERROR"}
    assert "spec.tags" in errors["Ignoring invalid ec2nodeclass tagged"]
    pool_error = errors["Ignoring invalid nodepool uses-tagged"]
    assert 'EC2NodeClass "tagged" is invalid' in pool_error and "not found" not in pool_error
    assert 'EC2NodeClass "missing" not found' in errors["Ignoring invalid nodepool uses-missing"]
    by_name = {e["name"]: e["message"] for e in cluster["events"]}
    assert 'EC2NodeClass "tagged" is invalid' in by_name["uses-tagged"]


def test_a_status_write_is_not_news_but_a_spec_change_is(cluster, caplog) -> None:
    """Found live: karpy's own status pass bumps an invalid NodePool's resourceVersion every minute,
    and each bump logged the ERROR and recorded the Event again. A status write leaves
    metadata.generation alone (the CRDs have the status subresource); a spec change bumps it."""
    bad = nodepool("bad", taints="not a list")
    bad["metadata"]["generation"] = 1
    cluster["nodepools"] = [bad]
    for version in ("1", "2", "3"):
        bad["metadata"]["resourceVersion"] = version
        kube_provisioners.list_nodepools(object(), cluster_name="c")
    assert len([r for r in caplog.records if r.levelname == "ERROR"]) == 1
    bad["metadata"]["generation"] = 2
    kube_provisioners.list_nodepools(object(), cluster_name="c")
    assert len([r for r in caplog.records if r.levelname == "ERROR"]) == 2
    assert len(cluster["events"]) == 2
