"""Karpenter's published v1alpha5 examples, as the controller loads them (providerRef resolved), launch
what they describe on moto: the launch template of an m5.large holds the AMI their family publishes in
SSM, their block devices (or the family's) and their metadata options; what cannot launch is refused
with a CloudError that says why (AL2 on Kubernetes 1.33+, placeholder AMI ids)."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from extender.api import nodeclass as nc
from extender.cloud.aws.launchtemplates import block_device_mapping, metadata_options
from extender.cloud.aws.provider import AWSCloudProvider
from extender.cloud.types import CloudError, LaunchRequest
from tests.integration.aws.test_node_families import FAMILIES, templates_of
from tests.unit.api.test_karpenter_examples import DOCS, expected_refusals, resolved
from tests.unit.cloud.test_userdata import READERS

pytestmark = pytest.mark.integration

#: Examples whose Provisioner karpy admits (the others are refused at admission, see the unit test).
LAUNCHABLE = sorted(
    {
        name
        for name, doc in DOCS
        if doc["kind"] == "Provisioner"
        and not expected_refusals(name, doc)
        and not any(expected_refusals(n, d) for n, d in DOCS if n == name)
    }
)


PLACEHOLDERS = ("${CLUSTER_NAME}", "CLUSTER_NAME", "my-cluster")


def _ours(selector: nc.Selector, cluster: str) -> nc.Selector:
    # `resolved` defaults a missing selector for cluster "demo".
    return tuple(
        nc.SelectorTerm(
            tags={
                k.replace("kubernetes.io/cluster/demo", f"kubernetes.io/cluster/{cluster}"): cluster
                if v in PLACEHOLDERS
                else v
                for k, v in term.tags.items()
            }
        )
        for term in selector
    )


@pytest.mark.parametrize("name", LAUNCHABLE)
def test_example_launches_what_it_describes(
    name: str,
    provider_at: Callable[..., AWSCloudProvider],
    launch: Callable[..., LaunchRequest],
    aws: Any,
) -> None:
    provisioner = resolved(name)
    # The examples say "replace with your cluster name": their selectors name this seed's cluster.
    node_class = replace(
        provisioner.provider,
        subnet_selector=_ours(provisioner.provider.subnet_selector, aws.cluster_name),
        security_group_selector=_ours(provisioner.provider.security_group_selector, aws.cluster_name),
    )
    provisioner = replace(provisioner, provider=node_class)
    family = node_class.family
    version = FAMILIES[family][0] if family in FAMILIES else aws.k8s_version
    provider = provider_at(version)
    request = launch(
        ["m5.large"],
        provisioner=provisioner,
        capacity_types=["on-demand"],
        labels={"run": uuid.uuid4().hex[:8]},
    )
    if node_class.ami_selector:
        # The examples select placeholder ids ("ami-123,ami456"): EC2 finds no such image.
        with pytest.raises(CloudError, match=r"amiSelector|describing images"):
            provider.create(request)
        return
    (data,) = templates_of(provider, request).values()
    assert data["ImageId"] == aws.amis[FAMILIES[family][1]["m5.large"]]
    assert data["BlockDeviceMappings"] == [block_device_mapping(m) for m in node_class.block_devices()]
    assert data["MetadataOptions"] == metadata_options(node_class.metadata_options)
    user_data = base64.b64decode(data["UserData"]).decode()
    assert READERS[family](user_data).cluster == aws.cluster_name
    if family == nc.BOTTLEROCKET and node_class.user_data:
        assert "kube-api-qps = 30" in user_data  # the example's own setting, kept
