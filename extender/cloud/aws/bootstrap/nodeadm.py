"""AL2023: nodeadm's NodeConfig (node.eks.aws/v1alpha1) as the last part of a MIME archive.

nodeadm merges every NodeConfig part in order, later values winning (kubelet flags are appended),
so karpy's part comes last: the cluster, kubelet settings, labels and taints are karpy's.
"""

from __future__ import annotations

from typing import Any

import yaml

from extender.cloud.aws.bootstrap import mime
from extender.cloud.aws.bootstrap.node import NodeBootstrap

API_VERSION = "node.eks.aws/v1alpha1"


def node_config(node: NodeBootstrap) -> dict[str, Any]:
    kubelet: dict[str, Any] = {"config": node.kubelet.config()}
    if node.taints:
        kubelet["config"]["registerWithTaints"] = [
            {"key": t.key, **({"value": t.value} if t.value else {}), "effect": t.effect}
            for t in node.sorted_taints()
        ]
    if labels := node.kubelet_labels():
        kubelet["flags"] = ['--node-labels="' + ",".join(f"{k}={v}" for k, v in labels.items()) + '"']
    spec: dict[str, Any] = {
        "cluster": {
            "name": node.cluster_name,
            "apiServerEndpoint": node.endpoint,
            "certificateAuthority": node.ca_bundle,
            "cidr": node.cluster_cidr,
        },
        "kubelet": kubelet,
    }
    if node.instance_store_raid0:
        spec["instance"] = {"localStorage": {"strategy": "RAID0"}}
    return {"apiVersion": API_VERSION, "kind": "NodeConfig", "spec": spec}


def render(node: NodeBootstrap) -> str:
    document = "# karpy generated NodeConfig\n" + yaml.safe_dump(node_config(node), sort_keys=False)
    parts = [*mime.split(node.user_data, node_config=True), (mime.NODE_CONFIG, document)]
    return mime.archive(parts)
