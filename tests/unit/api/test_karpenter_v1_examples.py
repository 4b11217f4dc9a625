"""Karpenter's published v1 examples (aws/karpenter-provider-aws `examples/v1/` at v1.14.1, and the
getting-started guide's NodePool; tests/data/karpenter-examples/v1) through karpy's v1 admission
handlers as the API server sends them: each is accepted, or refused with a message naming what karpy
does not support; an accepted NodePool loads, with its EC2NodeClass, into the Provisioner the
example describes."""

from __future__ import annotations

from pathlib import Path
from string import Template
from typing import Any

import pytest
import yaml

from extender.api import nodeclass as nc
from extender.api.ec2nodeclass import load_ec2nodeclass
from extender.api.nodepool import load_nodepool
from webhook import nodepool as hooks
from webhook.admission import AdmissionRequest, GroupVersionKind
from webhook.config import WebhookConfig

EXAMPLES = Path(__file__).resolve().parents[2] / "data" / "karpenter-examples" / "v1"
CONFIG = WebhookConfig(cluster_name="demo")
#: What the getting-started guide's `envsubst` fills in (step01-config.sh).
GUIDE_ENV = {"CLUSTER_NAME": "demo", "ALIAS_VERSION": "v20240625"}

#: (file, kind) -> the start of every refusal: what karpy does not implement, by field. The one
#: refusal that is not karpy's: windows-custom-userdata.yaml's nodeClassRef.group has a version in
#: it, which Karpenter's own CRD refuses too (group pattern `^[^/]*$`).
REFUSED = {
    ("custom-family-with-alias.yaml", "EC2NodeClass"): (
        "spec.amiFamily: Custom with an alias is not supported",
    ),
    ("windows-2019.yaml", "EC2NodeClass"): (
        'spec.amiSelectorTerms[0].alias: "windows2019@latest" is not supported',
    ),
    ("windows-2022.yaml", "EC2NodeClass"): (
        'spec.amiSelectorTerms[0].alias: "windows2022@latest" is not supported',
    ),
    ("windows-2025.yaml", "EC2NodeClass"): (
        'spec.amiSelectorTerms[0].alias: "windows2025@latest" is not supported',
    ),
    ("windows-custom-userdata.yaml", "EC2NodeClass"): (
        'spec.amiSelectorTerms[0].alias: "windows2022@latest" is not supported',
        'spec.amiFamily: "Windows2022" is not supported',
    ),
    ("windows-custom-userdata.yaml", "NodePool"): (
        'spec.template.spec.nodeClassRef.group: "karpenter.k8s.aws/v1" is not karpenter.k8s.aws',
    ),
}


def documents() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted(EXAMPLES.rglob("*.yaml")):
        text = path.read_text()
        if path.parent.name == "getting-started":
            text = Template(text).safe_substitute(GUIDE_ENV)
        found += [(str(path.relative_to(EXAMPLES)), doc) for doc in yaml.safe_load_all(text) if doc]
    return found


DOCS = documents()


def expected_refusals(name: str, doc: dict[str, Any]) -> tuple[str, ...]:
    return REFUSED.get((name, doc["kind"]), ())


def verdict(doc: dict[str, Any]) -> Any:
    group, version = doc["apiVersion"].split("/")
    request = AdmissionRequest(
        uid="u", kind=GroupVersionKind(group, version, doc["kind"]), operation="CREATE", object=doc
    )
    if doc["kind"] == "NodePool":
        return hooks.validate_nodepool(request)
    return hooks.validate_ec2nodeclass(request, CONFIG)


def test_every_example_is_here() -> None:
    names = {name for name, _ in DOCS}
    assert len(names) == 23 and "getting-started/step12-add-nodepool.yaml" in names
    assert all(key in {(n, d["kind"]) for n, d in DOCS} for key in REFUSED)


@pytest.mark.parametrize(
    ("name", "doc"), DOCS, ids=[f"{n}:{d['kind']}:{d['metadata']['name']}" for n, d in DOCS]
)
def test_example_is_accepted_or_refused_naming_the_field(name: str, doc: dict[str, Any]) -> None:
    answer = verdict(doc)
    expected = expected_refusals(name, doc)
    if not expected:
        assert answer.allowed, answer
        return
    assert not answer.allowed and answer.code == 403
    lines = answer.message.split("; ")
    assert len(lines) == len(expected), lines
    for start, line in zip(expected, lines, strict=True):
        assert line.startswith(start), (start, line)


@pytest.mark.parametrize("name", sorted({n for n, _ in DOCS}))
def test_accepted_nodepools_load_with_their_node_class(name: str) -> None:
    docs = [d for n, d in DOCS if n == name and not expected_refusals(n, d)]
    classes = {}
    for doc in docs:
        if doc["kind"] == "EC2NodeClass":
            loaded = load_ec2nodeclass(doc, cluster_name="demo")
            classes[loaded.name] = loaded
    pools = [load_nodepool(doc, classes) for doc in docs if doc["kind"] == "NodePool" and classes]
    for pool in pools:
        klass = next(d for d in docs if d["kind"] == "EC2NodeClass")["spec"]
        alias = (klass["amiSelectorTerms"][0].get("alias") or "").split("@")[0]
        family = (
            klass.get("amiFamily")
            or {"al2023": nc.AL2023, "bottlerocket": nc.BOTTLEROCKET, "al2": nc.AL2}[alias]
        )
        assert pool.kind == "NodePool" and pool.provider.family == family
        assert pool.provider.role == klass["role"] and pool.provider.subnet_selector


def test_getting_started_nodepool_is_the_guides() -> None:
    docs = [d for n, d in DOCS if n.startswith("getting-started/")]
    (klass,) = [load_ec2nodeclass(d, cluster_name="demo") for d in docs if d["kind"] == "EC2NodeClass"]
    (pool,) = [load_nodepool(d, {klass.name: klass}) for d in docs if d["kind"] == "NodePool"]
    assert pool.limits.cpu == 1000 and pool.consolidation and pool.consolidate_after == 60
    assert pool.ttl_seconds_until_expired == 720 * 3600
    assert pool.provider.ami_version == "v20240625"
    assert pool.provider.subnet_selector == (nc.SelectorTerm(tags={"karpenter.sh/discovery": "demo"}),)


def test_min_values_examples_keep_their_min_values() -> None:
    """min-values-family.yaml and min-values-multiple-keys.yaml (refused before karpy kept minValues)
    load with each requirement's minValues; the solver reads the largest per key."""
    from extender.scheduling.constraints import min_values

    pools = {
        name: load_nodepool(doc)
        for name, doc in DOCS
        if name.startswith("min-values") and doc["kind"] == "NodePool"
    }
    assert min_values(pools["min-values-multiple-keys.yaml"]) == (
        ("karpenter.k8s.aws/instance-category", 2),
        ("karpenter.k8s.aws/instance-family", 5),
        ("node.kubernetes.io/instance-type", 2),
    )
    family = pools["min-values-family.yaml"]
    assert [r.min_values for r in family.requirements if r.min_values is not None] == [5]
