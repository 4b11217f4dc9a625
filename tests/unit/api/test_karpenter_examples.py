"""Karpenter's own published v1alpha5 examples (aws/karpenter-provider-aws `examples/provisioner/`,
every distinct version from v0.10.0 to v0.31.0, in tests/data/karpenter-examples) go through
karpy's admission webhook handlers (defaulting, then validation) as the API server would send them:
each is accepted, or refused with a message naming the field karpy does not support; an accepted
Provisioner resolves its providerRef into the node configuration the example describes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from extender.api import nodeclass as nc
from extender.api.nodetemplate import default_node_template, load_node_template
from extender.api.provisioner_defaults import default_manifest
from extender.api.provisioner_schema import REQUIREMENT_KEYS, load_provisioner
from webhook import nodetemplate, provisioner
from webhook.admission import AdmissionRequest, GroupVersionKind
from webhook.config import WebhookConfig

EXAMPLES = Path(__file__).resolve().parents[2] / "data" / "karpenter-examples"
CONFIG = WebhookConfig(cluster_name="demo", default_instance_profile="KarpenterNodeInstanceProfile-demo")
GIB = 2**30

#: (file, kind) -> the start of every refusal line: what karpy does not support, by field.
REFUSED = {
    # These two put Provisioner fields under spec.provider; Karpenter's lenient decoding dropped
    # them silently, karpy's strict provider decoding names them.
    ("v0.10.0/node-ttls.yaml", "Provisioner"): (
        "spec.provider.ttlSecondsAfterEmpty: Unknown field",
        "spec.provider.ttlSecondsUntilExpired: Unknown field",
    ),
    ("v0.11.0/general-purpose.yaml", "Provisioner"): ("spec.provider.requirements: Unknown field",),
    ("v0.29.0/windows2019.yaml", "AWSNodeTemplate"): ('spec.amiFamily: "Windows2019" is not supported',),
    ("v0.29.0/windows2022.yaml", "AWSNodeTemplate"): ('spec.amiFamily: "Windows2022" is not supported',),
    ("v0.30.0/launchtemplates/windows-custom-userdata.yaml", "AWSNodeTemplate"): (
        'spec.amiFamily: "Windows2022" is not supported',
    ),
}


def documents() -> Iterator[tuple[str, dict[str, Any]]]:
    for path in sorted(EXAMPLES.rglob("*.yaml")):
        if path.relative_to(EXAMPLES).parts[0] == "v1":
            continue  # the v1 examples: test_karpenter_v1_examples.py
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                yield str(path.relative_to(EXAMPLES)), doc


DOCS = list(documents())


def request(doc: dict[str, Any]) -> AdmissionRequest:
    group, version = doc["apiVersion"].split("/")
    return AdmissionRequest(
        uid="u", kind=GroupVersionKind(group, version, doc["kind"]), operation="CREATE", object=doc
    )


def admit(doc: dict[str, Any]) -> list[str]:
    """The webhook's refusal lines ([] = admitted); a Provisioner is validated as its defaulting
    handler left it (its patch is the difference to `default_manifest`), as on the API server."""
    if doc["kind"] == "AWSNodeTemplate":
        verdict = nodetemplate.validate(request(doc), CONFIG)
    else:
        assert provisioner.mutate(request(doc), CONFIG).allowed
        defaulted = default_manifest(
            doc, cluster_name=CONFIG.cluster_name, instance_profile=CONFIG.default_instance_profile
        )
        verdict = provisioner.validate(request(defaulted))
    return [] if verdict.allowed else verdict.message.split("; ")


def expected_refusals(name: str, doc: dict[str, Any]) -> tuple[str, ...]:
    if (name, doc["kind"]) in REFUSED:
        return REFUSED[(name, doc["kind"])]
    # Instance-type label keys (karpenter.k8s.aws/instance-*) are refused by name until karpy knows them.
    return tuple(
        f'spec.requirements[{i}].key: "{r["key"]}" not in'
        for i, r in enumerate(doc["spec"].get("requirements", []))
        if r["key"] not in REQUIREMENT_KEYS
    )


def test_every_distinct_example_version_is_here() -> None:
    assert len({name for name, _ in DOCS}) == 37
    assert len(DOCS) == 63


@pytest.mark.parametrize(("name", "doc"), DOCS, ids=[f"{n}:{d['kind']}" for n, d in DOCS])
def test_example_is_admitted_or_refused_naming_the_field(name: str, doc: dict[str, Any]) -> None:
    problems = admit(doc)
    expected = expected_refusals(name, doc)
    assert len(problems) == len(expected), problems
    for line, start in zip(sorted(problems), sorted(expected), strict=True):
        assert line.startswith(start), (line, start)


def resolved(name: str) -> Any:
    """The example's Provisioner as the controller loads it, its providerRef resolved."""
    docs = [doc for n, doc in DOCS if n == name]
    templates = dict(
        load_node_template(default_node_template(d, cluster_name="demo", instance_profile="p"))
        for d in docs
        if d["kind"] == "AWSNodeTemplate"
    )
    (prov,) = [d for d in docs if d["kind"] == "Provisioner"]
    return load_provisioner(default_manifest(prov, cluster_name="demo", instance_profile="p"), templates)


def test_examples_launch_what_they_describe() -> None:
    bottlerocket = resolved("v0.17.0/bottlerocket.yaml").provider
    assert bottlerocket.family == nc.BOTTLEROCKET
    assert [m.device_name for m in bottlerocket.block_devices()] == ["/dev/xvda", "/dev/xvdb"]
    assert bottlerocket.ephemeral_storage() == 20 * GIB  # the data volume, not the 4Gi OS volume

    custom_ami = resolved("v0.28.0/launchtemplates/al2-custom-ami.yaml").provider
    assert custom_ami.family == nc.AL2 and custom_ami.ami_selector == {"aws-ids": "ami-123,ami456"}
    assert custom_ami.instance_profile == "myInstanceProfile"
    assert custom_ami.user_data is not None and "Running a custom user data script" in custom_ami.user_data

    custom = resolved("v0.28.0/launchtemplates/custom-family.yaml").provider
    assert custom.family == nc.CUSTOM and custom.block_devices() == ()

    br_settings = resolved("v0.28.0/launchtemplates/br-custom-userdata.yaml").provider
    assert br_settings.family == nc.BOTTLEROCKET and "kube-api-qps = 30" in (br_settings.user_data or "")

    ubuntu = resolved("v0.31.0/launchtemplates/ubuntu-kubelet-log-query.yaml").provider
    assert ubuntu.family == nc.UBUNTU and ubuntu.ephemeral_storage() == 20 * GIB

    ebs = load_node_template(
        default_node_template(
            next(d for n, d in DOCS if n == "v0.15.0/multiple-ebs.yaml" and d["kind"] == "AWSNodeTemplate"),
            cluster_name="demo",
            instance_profile="p",
        )
    )[1]
    assert [(m.device_name, m.ebs.volume_size) for m in ebs.block_devices()] == [
        ("/dev/xvda", 20 * GIB),
        ("/dev/xvdb", 100 * GIB),
        ("/dev/xvdc", 2000 * GIB),
    ]
    # Examples that name no family get karpy's default (Karpenter v0.x defaulted to AL2).
    assert resolved("v0.13.0/spot.yaml").provider.family == nc.AL2023
