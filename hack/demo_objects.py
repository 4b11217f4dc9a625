"""The demo's Kubernetes side: the objects it creates (Provisioner, or NodePool + EC2NodeClass;
`inflate`; webhook configurations pointed at 127.0.0.1) and the few API calls it makes, as API JSON
through karpy's client adapter.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
NAMESPACE = "default"
APP = "inflate"
# The image Karpenter's getting-started guide uses; kwok never pulls it.
PAUSE_IMAGE = "public.ecr.aws/eks-distro/kubernetes/pause:3.2"


def provisioner(cluster_name: str, ttl: int) -> dict[str, Any]:
    selector = {f"kubernetes.io/cluster/{cluster_name}": "*"}
    return {
        "apiVersion": "karpenter.sh/v1alpha5",
        "kind": "Provisioner",
        "metadata": {"name": "default"},
        "spec": {
            "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}],
            "limits": {"resources": {"cpu": "1000"}},
            "provider": {
                "instanceProfile": f"KarpenterNodeInstanceProfile-{cluster_name}",
                "subnetSelector": selector,
                "securityGroupSelector": selector,
            },
            "ttlSecondsAfterEmpty": ttl,
        },
    }


def nodepool(cluster_name: str, ttl: int) -> list[dict[str, Any]]:
    """The same default as `provisioner`, in Karpenter v1's API: an EC2NodeClass and a NodePool whose
    empty nodes go `ttl` seconds after they empty (WhenEmpty), as the getting-started guide's."""
    selector = [{"tags": {f"kubernetes.io/cluster/{cluster_name}": "*"}}]
    return [
        {
            "apiVersion": "karpenter.k8s.aws/v1",
            "kind": "EC2NodeClass",
            "metadata": {"name": "default"},
            "spec": {
                "role": f"KarpenterNodeRole-{cluster_name}",
                "amiSelectorTerms": [{"alias": "al2023@latest"}],
                "subnetSelectorTerms": selector,
                "securityGroupSelectorTerms": selector,
            },
        },
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": "default"},
            "spec": {
                "template": {
                    "spec": {
                        "requirements": [
                            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}
                        ],
                        "nodeClassRef": {
                            "group": "karpenter.k8s.aws",
                            "kind": "EC2NodeClass",
                            "name": "default",
                        },
                    }
                },
                "limits": {"cpu": "1000"},
                "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": f"{ttl}s"},
            },
        },
    ]


def inflate(replicas: int, node_selector: Mapping[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": APP, "image": PAUSE_IMAGE, "resources": {"requests": {"cpu": "1"}}}],
    }
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": APP, "namespace": NAMESPACE},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": APP}},
            "template": {"metadata": {"labels": {"app": APP}}, "spec": spec},
        },
    }


def local_webhook_configurations(port: int) -> list[dict[str, Any]]:
    """manifests/webhook/webhooks.yaml with each Service reference replaced by https://127.0.0.1:<port>."""
    docs = yaml.safe_load_all((REPO / "manifests" / "webhook" / "webhooks.yaml").read_text())
    result = []
    for doc in docs:
        if not doc:
            continue
        doc = copy.deepcopy(doc)
        for hook in doc.get("webhooks") or []:
            service = hook["clientConfig"].pop("service")
            hook["clientConfig"]["url"] = f"https://127.0.0.1:{port}{service.get('path', '/')}"
        result.append(doc)
    return result


class Kube:
    """The few API calls the demo makes, as API JSON, through karpy's own client adapter."""

    def __init__(self, kubeconfig: str) -> None:
        from kubernetes import client

        from extender.cluster import client as kube_client
        from extender.settings import Settings

        self.client = client
        self.api = kube_client.load(Settings(kubeconfig=kubeconfig))
        self.call = kube_client.call_json
        self.core = client.CoreV1Api(self.api)
        self.apps = client.AppsV1Api(self.api)

    def create_file(self, path: Path) -> None:
        """Create the Namespace / CustomResourceDefinition objects of a manifest file."""
        creators = {
            "Namespace": self.core.create_namespace,
            "CustomResourceDefinition": self.client.ApiextensionsV1Api(
                self.api
            ).create_custom_resource_definition,
        }
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                self.call(creators[doc["kind"]], doc)

    def crd_established(self, name: str) -> bool:
        crd = self.call(self.client.ApiextensionsV1Api(self.api).read_custom_resource_definition, name)
        conditions = (crd.get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)

    def create_webhook_configuration(self, body: Mapping[str, Any]) -> None:
        api = self.client.AdmissionregistrationV1Api(self.api)
        create = (
            api.create_mutating_webhook_configuration
            if body["kind"] == "MutatingWebhookConfiguration"
            else api.create_validating_webhook_configuration
        )
        self.call(create, body)

    def label_namespace(self, name: str, labels: Mapping[str, str]) -> None:
        self.call(
            self.core.patch_namespace,
            name,
            {"metadata": {"labels": dict(labels)}},
            _content_type="application/merge-patch+json",
        )

    def create_provisioner(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Create a Provisioner, NodePool or EC2NodeClass (cluster-scoped custom objects)."""
        group, version = body["apiVersion"].split("/")
        plural = {"NodePool": "nodepools", "EC2NodeClass": "ec2nodeclasses"}.get(body["kind"], "provisioners")
        api = self.client.CustomObjectsApi(self.api)
        return self.call(api.create_cluster_custom_object, group, version, plural, body)

    def create_deployment(self, body: Mapping[str, Any]) -> None:
        self.call(self.apps.create_namespaced_deployment, NAMESPACE, body)

    def scale(self, replicas: int) -> None:
        self.call(
            self.apps.patch_namespaced_deployment_scale,
            APP,
            NAMESPACE,
            {"spec": {"replicas": replicas}},
            _content_type="application/merge-patch+json",
        )

    def delete_deployment(self) -> None:
        self.call(self.apps.delete_namespaced_deployment, APP, NAMESPACE, propagation_policy="Background")

    def pods(self) -> list[dict[str, Any]]:
        return (
            self.call(self.core.list_namespaced_pod, NAMESPACE, label_selector=f"app={APP}").get("items")
            or []
        )

    def karpy_nodes(self) -> list[dict[str, Any]]:
        """karpy's Nodes as API JSON (the observer reads labels, capacity and conditions from it)."""
        from extender.cluster.nodes import list_node_manifests

        return list_node_manifests(self.api, karpy_only=True)

    def close(self) -> None:
        self.api.close()
