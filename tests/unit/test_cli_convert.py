"""`karpy convert` (extender/api/migrate.py): v1alpha5 Provisioners and AWSNodeTemplates become v1
NodePools and EC2NodeClasses as Karpenter's karpenter-convert does them (aws/karpenter-provider-aws
tools/karpenter-convert, v0.32.10: defaults written out unless --ignore-defaults, an inline provider
becomes an EC2NodeClass named as the Provisioner, launchTemplate refused, a $KARPENTER_NODE_ROLE
placeholder), and the round trip holds: `karpy plan` plans the same instance types for the same
pods on the original and on the converted files, for Karpenter's published v1alpha5 examples."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from extender.cli.main import main
from tests import builders
from tests.unit.api.test_karpenter_examples import DOCS as V1ALPHA5_DOCS
from tests.unit.api.test_karpenter_examples import expected_refusals

DATA = Path(__file__).resolve().parents[1] / "data"
PODS = [
    {
        "kind": "Pod",
        "metadata": {"name": f"p{i}", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": mem}}}]},
    }
    for i, (cpu, mem) in enumerate([("1", "1Gi"), ("2", "4Gi"), ("500m", "8Gi"), ("3", "2Gi"), ("1", "1Gi")])
]


def write(path: Path, docs: list[dict[str, Any]]) -> Path:
    path.write_text(yaml.safe_dump_all(docs))
    return path


def convert(
    tmp_path: Path, capsys: Any, docs: list[dict[str, Any]], *flags: str
) -> tuple[int, list[dict[str, Any]], str]:
    source = write(tmp_path / "v1alpha5.yaml", docs)
    code = main(["convert", "-f", str(source), *flags])
    out, err = capsys.readouterr()
    return code, [d for d in yaml.safe_load_all(out) if d] if code == 0 else [], err


def plan(
    tmp_path: Path, capsys: Any, docs: list[dict[str, Any]], name: str
) -> list[tuple[str, tuple[str, ...]]]:
    """(cheapest type, pods) per planned node, and the unschedulable pods."""
    provisioners = write(tmp_path / f"{name}.yaml", docs)
    pods = write(tmp_path / "pods.yaml", PODS)
    code = main(
        [
            "plan",
            "--pods",
            str(pods),
            "--provisioner",
            str(provisioners),
            "--instance-types",
            str(DATA / "instance-types.json"),
            "-o",
            "json",
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    result = json.loads(out)
    nodes = sorted((n["instanceType"], tuple(sorted(n["pods"]))) for n in result["nodes"])
    return [*nodes, ("unschedulable", tuple(sorted(u["pod"] for u in result["unschedulable"])))]


def provisioner(name: str = "default", **spec: Any) -> dict[str, Any]:
    return builders.provisioner_manifest(name) | {"spec": spec}


def test_inline_provider_becomes_a_node_class_named_as_the_provisioner(
    tmp_path: Path, capsys: Any, monkeypatch: Any
) -> None:
    monkeypatch.setenv("KARPY_CLUSTER_NAME", "demo")
    monkeypatch.delenv("KARPY_AWS_DEFAULT_INSTANCE_PROFILE", raising=False)
    source = provisioner(
        labels={"team": "a"},
        taints=[{"key": "t", "effect": "NoSchedule"}],
        ttlSecondsAfterEmpty=30,
        ttlSecondsUntilExpired=2592000,
        limits={"resources": {"cpu": "100"}},
        weight=10,
        kubeletConfiguration={"maxPods": 20},
        provider={"instanceProfile": "Profile", "tags": {"a": "b"}, "cluster": {"name": "demo"}},
    )
    code, (klass, pool), err = convert(tmp_path, capsys, [source])
    assert code == 0
    assert klass["kind"] == "EC2NodeClass" and klass["metadata"]["name"] == "default"
    assert klass["spec"]["instanceProfile"] == "Profile" and "role" not in klass["spec"]
    assert klass["spec"]["amiSelectorTerms"] == [{"alias": "al2023@latest"}]
    assert klass["spec"]["subnetSelectorTerms"] == [{"tags": {"kubernetes.io/cluster/demo": "*"}}]
    assert klass["spec"]["kubelet"] == {"maxPods": 20} and klass["spec"]["tags"] == {"a": "b"}
    assert klass["spec"]["metadataOptions"]["httpPutResponseHopLimit"] == 2
    spec = pool["spec"]
    assert spec["template"]["metadata"] == {"labels": {"team": "a"}}
    assert spec["template"]["spec"]["expireAfter"] == "2592000s"
    assert spec["template"]["spec"]["nodeClassRef"] == {
        "group": "karpenter.k8s.aws",
        "kind": "EC2NodeClass",
        "name": "default",
    }
    # The v1alpha5 defaults written out, as karpenter-convert does without --ignore-defaults.
    keys = [r["key"] for r in spec["template"]["spec"]["requirements"]]
    assert keys == ["kubernetes.io/arch", "karpenter.sh/capacity-type"]
    assert spec["disruption"] == {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s"}
    assert spec["limits"] == {"cpu": "100"} and spec["weight"] == 10
    assert "spec.provider.cluster: no v1 counterpart" in err
    assert "metadataOptions: written out with v1alpha5's defaults" in err


def test_ignore_defaults_no_ttl_consolidation_and_role_placeholder(
    tmp_path: Path, capsys: Any, monkeypatch: Any
) -> None:
    monkeypatch.delenv("KARPY_AWS_DEFAULT_INSTANCE_PROFILE", raising=False)
    template = {
        "apiVersion": "karpenter.k8s.aws/v1alpha1",
        "kind": "AWSNodeTemplate",
        "metadata": {"name": "t"},
        "spec": {"amiSelector": {"aws-ids": "ami-1,ami-2"}, "amiFamily": "AL2"},
    }
    plain = provisioner("plain", providerRef={"name": "t"})
    packed = provisioner(
        "packed",
        providerRef={"name": "t"},
        consolidation={"enabled": True},
        kubeletConfiguration={"maxPods": 9},
    )
    code, out, err = convert(tmp_path, capsys, [template, plain, packed], "--ignore-defaults")
    assert code == 0
    kinds = [(d["kind"], d["metadata"]["name"]) for d in out]
    # Different kubelet settings on one template: one EC2NodeClass each.
    assert kinds == [
        ("EC2NodeClass", "t"),
        ("NodePool", "plain"),
        ("EC2NodeClass", "t-packed"),
        ("NodePool", "packed"),
    ]
    assert out[0]["spec"]["role"] == "$KARPENTER_NODE_ROLE" and "$KARPENTER_NODE_ROLE" in err
    assert (
        out[0]["spec"]["amiSelectorTerms"] == [{"id": "ami-1"}, {"id": "ami-2"}]
        and out[0]["spec"]["amiFamily"] == "AL2"
    )
    assert out[1]["spec"]["template"]["spec"]["requirements"] == []
    assert out[1]["spec"]["disruption"] == {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"}
    assert out[1]["spec"]["template"]["spec"]["expireAfter"] == "Never"
    assert out[3]["spec"]["disruption"]["consolidationPolicy"] == "WhenEmptyOrUnderutilized"
    assert out[2]["spec"]["kubelet"] == {"maxPods": 9}


def test_what_cannot_be_converted_is_refused_by_name(tmp_path: Path, capsys: Any) -> None:
    code, _, err = convert(tmp_path, capsys, [provisioner(provider={"launchTemplate": "lt"})])
    assert code == 2 and 'Provisioner default: spec.provider: cannot convert with "launchTemplate"' in err
    code, _, err = convert(
        tmp_path, capsys, [provisioner(provider={"amiFamily": "Ubuntu", "instanceProfile": "p"})]
    )
    assert code == 2 and "amiFamily: Ubuntu has no v1 counterpart" in err
    code, _, err = convert(tmp_path, capsys, [{"kind": "Pod", "metadata": {"name": "x"}}])
    assert code == 2 and "Pod x: unknown kind, expected one of Provisioner, AWSNodeTemplate" in err


#: The published v1alpha5 examples karpy accepts, one file each (tests/data/karpenter-examples).
ACCEPTED = sorted(
    {name for name, doc in V1ALPHA5_DOCS if doc["kind"] == "Provisioner" and not expected_refusals(name, doc)}
    - {name for name, doc in V1ALPHA5_DOCS if expected_refusals(name, doc)}
)


#: Its families (c6a, m6i, ...) are not in tests/data/instance-types.json: nothing plans, both ways.
PLANS_NOTHING = {"v0.15.0/multiple-ebs.yaml"}


@pytest.mark.parametrize("name", ACCEPTED)
def test_round_trip_plans_the_same_instance_types(
    tmp_path: Path, capsys: Any, monkeypatch: Any, name: str
) -> None:
    monkeypatch.setenv("KARPY_CLUSTER_NAME", "demo")
    docs = [doc for n, doc in V1ALPHA5_DOCS if n == name]
    original = plan(tmp_path, capsys, docs, "original")
    code, converted, err = convert(tmp_path, capsys, docs)
    if any((d.get("spec") or {}).get("amiFamily") == "Ubuntu" for d in docs):
        assert code == 2 and "amiFamily: Ubuntu has no v1 counterpart" in err  # Karpenter v1 dropped it
        return
    assert code == 0, err
    assert {d["kind"] for d in converted} == {"NodePool", "EC2NodeClass"}
    assert plan(tmp_path, capsys, converted, "converted") == original
    assert (name in PLANS_NOTHING) == all(kind == "unschedulable" for kind, _ in original)
