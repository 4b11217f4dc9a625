"""EFA and maxPods end to end on the local control plane + moto (issue 35): the provisioning worker
and the extender in this process, the real kube-apiserver/kube-scheduler/kwok, moto in server mode.

A pod requesting vpc.amazonaws.com/efa gets a node whose launch template (read back from moto)
carries one EFA interface per EFA its type supports, and whose Node advertises them; a pod asking
for none gets the same type without interfaces and a Node advertising no EFA (on AWS the device
plugin would report 0 there and kubelet would reject an EFA pod). Both user data carry the maxPods
the Node reports. Karpenter AWS v1.14.1: `launchtemplate.go` generateNetworkInterfaces,
`amifamily/resolver.go` Resolve, `cloudprovider.go` resourceFilter.
"""

from __future__ import annotations

import base64
import email
from typing import Any

import pytest
import yaml

from extender.api import labels as wk
from extender.api.resources import EFA
from tests.integration.helpers import (
    Karpy,
    all_bound,
    create_pods,
    node_of,
    pod_manifest,
    provisioner,
    unique,
    wait_for,
)

pytestmark = pytest.mark.integration

#: 72 vCPUs, one network card of 15 ENIs x 50 IPv4, one EFA; no GPU, so an EFA-only pod may use it.
EFA_TYPE = "c5n.18xlarge"


def only_the_efa_type() -> list[dict[str, Any]]:
    return [
        {"key": wk.INSTANCE_TYPE, "operator": "In", "values": [EFA_TYPE]},
        {"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
    ]


def test_an_efa_pod_gets_a_node_launched_with_its_efa_interface_a_plain_pod_none(
    karpy: Karpy, core_v1: Any, namespace: str
) -> None:
    with_efa, without = unique("efa"), unique("plain")
    for name in (with_efa, without):
        provisioner(karpy.kube, name, only_the_efa_type())
    fleets: list[dict[str, Any]] = []

    def record(params: dict[str, Any], **_: Any) -> None:
        fleets.append(params)

    karpy.ec2.meta.events.register("provide-client-params.ec2.CreateFleet", record)
    try:
        efa_pod = pod_manifest("efa", "1", selector={wk.PROVISIONER_NAME: with_efa})
        resources = efa_pod["spec"]["containers"][0]["resources"]
        resources["requests"][EFA] = "1"
        resources["limits"] = {EFA: "1"}
        plain_pod = pod_manifest("plain", "1", selector={wk.PROVISIONER_NAME: without})
        create_pods(core_v1, namespace, [efa_pod, plain_pod])
        pods = wait_for(all_bound(core_v1, namespace, 2), 120, "the EFA and the plain pod bound")
    finally:
        karpy.ec2.meta.events.unregister("provide-client-params.ec2.CreateFleet", record)

    nodes = {p.metadata.name: node_of(core_v1, p.spec.node_name) for p in pods}
    efa_node, plain_node = nodes["efa"], nodes["plain"]
    assert (
        efa_node.metadata.labels[wk.INSTANCE_TYPE] == plain_node.metadata.labels[wk.INSTANCE_TYPE] == EFA_TYPE
    )
    assert efa_node.status.capacity[EFA] == efa_node.status.allocatable[EFA] == "1"
    assert EFA not in plain_node.status.capacity and EFA not in plain_node.status.allocatable

    # The launch template each provisioner's fleet named, as moto holds it.
    templates: dict[str, dict[str, Any]] = {}
    for fleet in fleets:
        tags = {t["Key"]: t["Value"] for t in fleet["TagSpecifications"][0]["Tags"]}
        owner = tags.get(wk.PROVISIONER_NAME)
        if owner in (with_efa, without):
            (config,) = fleet["LaunchTemplateConfigs"]
            name = config["LaunchTemplateSpecification"]["LaunchTemplateName"]
            (version,) = karpy.ec2.describe_launch_template_versions(LaunchTemplateName=name)[
                "LaunchTemplateVersions"
            ]
            templates[owner] = version["LaunchTemplateData"]
    assert set(templates) == {with_efa, without}
    (interface,) = templates[with_efa]["NetworkInterfaces"]
    assert {k: interface[k] for k in ("NetworkCardIndex", "DeviceIndex", "InterfaceType")} == {
        "NetworkCardIndex": 0,
        "DeviceIndex": 0,
        "InterfaceType": "efa",
    }
    assert interface["Groups"] and "SecurityGroupIds" not in templates[with_efa]
    assert "NetworkInterfaces" not in templates[without]

    # maxPods: what each node's user data tells kubelet is what its Node reports (15 x 49 + 2).
    for owner, node in ((with_efa, efa_node), (without, plain_node)):
        assert max_pods_of(templates[owner]) == int(node.status.capacity["pods"]) == 737


def max_pods_of(template_data: dict[str, Any]) -> int:
    """kubelet maxPods in karpy's NodeConfig, the last part of the AL2023 MIME user data."""
    archive = email.message_from_string(base64.b64decode(template_data["UserData"]).decode())
    *_, last = archive.get_payload()
    assert last.get_content_type() == "application/node.eks.aws"
    return int(yaml.safe_load(last.get_payload())["spec"]["kubelet"]["config"]["maxPods"])
