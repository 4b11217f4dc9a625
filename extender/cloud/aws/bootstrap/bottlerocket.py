"""Bottlerocket: TOML settings (no MIME), the user's TOML with karpy's kubernetes settings merged in.

As Karpenter's AWS provider does: every setting outside `settings.kubernetes` is the user's; the
cluster, CA, labels (merged, karpy's win), taints (replaced) and the kubelet settings are karpy's.
"""

from __future__ import annotations

import tomllib
from typing import Any

from extender.cloud.aws.bootstrap import tomlwriter
from extender.cloud.aws.bootstrap.node import NodeBootstrap


def settings(node: NodeBootstrap) -> dict[str, Any]:
    document: dict[str, Any] = tomllib.loads(node.user_data) if node.user_data else {}
    kubernetes = document.setdefault("settings", {}).setdefault("kubernetes", {})
    k = node.kubelet
    kubernetes.update({"cluster-name": node.cluster_name, "api-server": node.endpoint})
    if node.ca_bundle:
        kubernetes["cluster-certificate"] = node.ca_bundle
    if k.cluster_dns:
        kubernetes["cluster-dns-ip"] = k.cluster_dns[0]
    optional: dict[str, Any] = {
        "max-pods": k.max_pods,
        "system-reserved": dict(k.system_reserved) or None,
        "kube-reserved": dict(k.kube_reserved) or None,
        "eviction-hard": dict(k.eviction_hard) or None,
        "eviction-soft": dict(k.eviction_soft) or None,
        "eviction-soft-grace-period": dict(k.eviction_soft_grace_period) or None,
        "eviction-max-pod-grace-period": k.eviction_max_pod_grace_period,
        # Bottlerocket's API types these two as strings.
        "image-gc-high-threshold-percent": _text(k.image_gc_high_threshold_percent),
        "image-gc-low-threshold-percent": _text(k.image_gc_low_threshold_percent),
        "cpu-cfs-quota-enforced": k.cpu_cfs_quota,
    }
    kubernetes.update({key: value for key, value in optional.items() if value is not None})
    labels = node.kubelet_labels()
    if labels or "node-labels" in kubernetes:
        kubernetes["node-labels"] = {**kubernetes.get("node-labels", {}), **labels}
    taints: dict[str, list[str]] = {}
    for taint in node.sorted_taints():
        taints.setdefault(taint.key, []).append(f"{taint.value}:{taint.effect}")
    if taints:
        kubernetes["node-taints"] = taints
    else:
        kubernetes.pop("node-taints", None)
    if node.instance_store_raid0:
        # Karpenter's Bottlerocket family: the ephemeral-storage API stripes the disks and binds the
        # kubelet's, containerd's and the pod logs' directories there, before kubelet starts.
        commands = document["settings"].setdefault("bootstrap-commands", {})
        commands["000-mount-instance-storage"] = {
            "commands": [
                ["apiclient", "ephemeral-storage", "init"],
                ["apiclient", "ephemeral-storage", "bind", "--dirs", *EPHEMERAL_DIRS],
            ],
            "mode": "always",
            "essential": True,
        }
    return document


EPHEMERAL_DIRS = ("/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods")


def _text(value: int | None) -> str | None:
    return None if value is None else str(value)


def render(node: NodeBootstrap) -> str:
    return tomlwriter.dumps(settings(node))
