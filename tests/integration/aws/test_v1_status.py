"""The status karpy writes on v1 objects (extender/cluster/v1status.py), as Karpenter v1 reports it:
on the local control plane (status subresource of karpy's v1 CRDs) from what the AWS provider finds
in moto. An EC2NodeClass whose selectors find subnets, security groups and AMIs is Ready with
status.subnets/securityGroups/amis/instanceProfile; one whose subnet selector finds nothing is not
Ready and says why in SubnetsReady (an unknown AMI release: in AMIsReady); a NodePool is Ready
when its EC2NodeClass is, with status.resources."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from extender.cloud.aws.provider import AWSCloudProvider
from extender.cluster import v1status
from extender.settings import Settings
from hack.localcluster.karpyenv import V1_CRDS, install_crd

pytestmark = pytest.mark.integration

RUN = uuid.uuid4().hex[:6]


def node_class(
    name: str, cluster: str, subnet_tags: dict[str, str], alias: str = "al2023@latest"
) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": name},
        "spec": {
            "role": "KarpenterNodeRole-demo",
            "amiSelectorTerms": [{"alias": alias}],
            "subnetSelectorTerms": [{"tags": subnet_tags}],
            "securityGroupSelectorTerms": [{"tags": {f"kubernetes.io/cluster/{cluster}": "*"}}],
        },
    }


def node_pool(name: str, node_class_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "spec": {
                    "requirements": [],
                    "nodeClassRef": {
                        "group": "karpenter.k8s.aws",
                        "kind": "EC2NodeClass",
                        "name": node_class_name,
                    },
                }
            }
        },
    }


def conditions(obj: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in obj["status"]["conditions"]}


def messages(obj: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["message"] for c in obj["status"]["conditions"]}


def test_status_is_written_as_karpenter_v1_reports_it(
    cluster: Any, provider: AWSCloudProvider, settings: Settings
) -> None:
    from kubernetes import client

    name = settings.cluster_name
    good, bad, os_release = f"ready-{RUN}", f"nosubnets-{RUN}", f"osrelease-{RUN}"
    with cluster.api_client() as api:
        for path in V1_CRDS:
            install_crd(api, path)
        objects = client.CustomObjectsApi(api)
        created = [
            (
                "karpenter.k8s.aws",
                "ec2nodeclasses",
                node_class(good, name, {f"kubernetes.io/cluster/{name}": "*"}),
            ),
            ("karpenter.k8s.aws", "ec2nodeclasses", node_class(bad, name, {"no-such-tag": "x"})),
            (
                "karpenter.k8s.aws",
                "ec2nodeclasses",
                # An OS release where an EKS AMI release belongs (issue 34: "none found for the node class").
                node_class(
                    os_release, name, {f"kubernetes.io/cluster/{name}": "*"}, "al2023@2023.0.20230222"
                ),
            ),
            ("karpenter.sh", "nodepools", node_pool(good, good)),
            ("karpenter.sh", "nodepools", node_pool(bad, bad)),
            ("karpenter.sh", "nodepools", node_pool(f"orphan-{RUN}", f"missing-{RUN}")),
        ]
        try:
            for group, plural, body in created:
                objects.create_cluster_custom_object(group, "v1", plural, body)
            v1status.refresh(api, provider.node_class_status, settings)

            ready = objects.get_cluster_custom_object("karpenter.k8s.aws", "v1", "ec2nodeclasses", good)
            status = ready["status"]
            assert conditions(ready)["Ready"] == ("True", "Ready")
            assert {"SubnetsReady", "SecurityGroupsReady", "AMIsReady", "InstanceProfileReady"} <= set(
                conditions(ready)
            )
            assert status["subnets"] and all(
                s["id"].startswith("subnet-") and s["zone"] for s in status["subnets"]
            )
            assert status["securityGroups"] and all(
                g["id"].startswith("sg-") for g in status["securityGroups"]
            )
            assert {a["requirements"][0]["values"][0] for a in status["amis"]} == {"amd64", "arm64"}
            assert all(a["id"].startswith("ami-") for a in status["amis"])
            # The configured default instance profile wins over the role's name (NodeClass.launch_profile).
            assert status["instanceProfile"] == settings.aws.default_instance_profile

            # Each part's condition apart, as Karpenter's node class controller sets them: the
            # subnets not found do not hide the security groups and AMIs that were.
            missing = objects.get_cluster_custom_object("karpenter.k8s.aws", "v1", "ec2nodeclasses", bad)
            assert conditions(missing)["Ready"] == ("False", "NotReady")
            assert conditions(missing)["SubnetsReady"] == ("False", "SubnetsNotFound")
            assert conditions(missing)["SecurityGroupsReady"] == ("True", "SecurityGroupsReady")
            assert conditions(missing)["AMIsReady"] == ("True", "AMIsReady")
            message = messages(missing)["SubnetsReady"]
            assert message.startswith("SubnetSelector did not match any Subnets: no subnets matched"), message
            assert missing["status"]["subnets"] == [] and missing["status"]["securityGroups"]
            assert "unresolved" not in missing["status"]
            wrong = objects.get_cluster_custom_object("karpenter.k8s.aws", "v1", "ec2nodeclasses", os_release)
            assert conditions(wrong)["Ready"] == ("False", "NotReady")
            assert conditions(wrong)["AMIsReady"] == ("False", "AMINotFound")
            assert conditions(wrong)["SubnetsReady"] == ("True", "SubnetsReady")
            message = messages(wrong)["AMIsReady"]
            assert "no AL2023 AMI release 2023.0.20230222 for Kubernetes" in message, message
            assert "amazon-eks-node-al2023-x86_64-standard-" in message, message
            assert "an EKS AMI release such as al2023@v20240807, not an OS release" in message, message

            pool = objects.get_cluster_custom_object("karpenter.sh", "v1", "nodepools", good)
            assert conditions(pool) == {
                "NodeClassReady": ("True", "NodeClassReady"),
                "Ready": ("True", "Ready"),
            }
            assert pool["status"]["resources"]["nodes"] == "0" and pool["status"]["nodes"] == 0
            for not_ready in (bad, f"orphan-{RUN}"):
                pool = objects.get_cluster_custom_object("karpenter.sh", "v1", "nodepools", not_ready)
                assert conditions(pool)["Ready"] == ("False", "NodeClassNotReady")

            # A second pass keeps the transition time of a condition that did not change.
            before = ready["status"]["conditions"]
            v1status.refresh(api, provider.node_class_status, settings)
            after = objects.get_cluster_custom_object("karpenter.k8s.aws", "v1", "ec2nodeclasses", good)
            assert [c["lastTransitionTime"] for c in after["status"]["conditions"]] == [
                c["lastTransitionTime"] for c in before
            ]
        finally:
            for group, plural, body in reversed(created):
                objects.delete_cluster_custom_object(group, "v1", plural, body["metadata"]["name"])
