"""Karpenter 0.5's defaults for a Provisioner manifest (its DefaultHook), applied before parsing.

Works on the API JSON, not the types: the webhook returns the defaulted manifest as a patch, and
the controller parses the defaulted manifest with `provisioner_schema.load_provisioner`.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from extender.api import labels


def default_manifest(
    obj: Mapping[str, Any], *, cluster_name: str, cluster_endpoint: str = "", instance_profile: str = ""
) -> dict[str, Any]:
    """The Provisioner manifest with Karpenter 0.5's defaults applied; `obj` is not modified.

    Rewrites the `node.k8s.aws/capacity-type` alias, defaults arch (amd64) and capacity type (on-demand)
    when neither requirements nor labels mention them, fills `provider.cluster` and defaults both
    selectors to `kubernetes.io/cluster/<cluster>: "*"`; `instance_profile` (Karpenter 0.5.6's
    AWS_DEFAULT_INSTANCE_PROFILE) fills a missing instanceProfile when no launchTemplate is set.
    Parts of the wrong shape are left alone for validation to report.
    """
    result = copy.deepcopy(dict(obj))
    spec = result.setdefault("spec", {})
    if not isinstance(spec, dict):
        return result
    raw_labels = spec.get("labels")
    if (
        isinstance(raw_labels, dict)
        and labels.CAPACITY_TYPE_ALIAS in raw_labels
        and labels.CAPACITY_TYPE not in raw_labels
    ):
        spec["labels"] = {canonical_key(k): v for k, v in raw_labels.items()}
    requirements = spec.setdefault("requirements", [])
    if isinstance(requirements, list):
        for req in requirements:
            if isinstance(req, dict) and isinstance(req.get("key"), str):
                req["key"] = canonical_key(req["key"])
        mentioned = {r["key"] for r in requirements if isinstance(r, dict) and isinstance(r.get("key"), str)}
        if isinstance(spec.get("labels"), dict):
            mentioned |= set(spec["labels"])
        for key, value in ((labels.ARCH, "amd64"), (labels.CAPACITY_TYPE, labels.CAPACITY_TYPE_ON_DEMAND)):
            if key not in mentioned:
                requirements.append({"key": key, "operator": "In", "values": [value]})
    # A providerRef's AWSNodeTemplate is defaulted when it is loaded (`default_provider`).
    provider = spec.setdefault("provider", {}) if spec.get("providerRef") is None else None
    if isinstance(provider, dict):
        default_provider(
            provider,
            cluster_name=cluster_name,
            cluster_endpoint=cluster_endpoint,
            instance_profile=instance_profile,
        )
    return result


def default_provider(
    provider: dict[str, Any], *, cluster_name: str, cluster_endpoint: str = "", instance_profile: str = ""
) -> None:
    """Fill a provider block (inline, or an AWSNodeTemplate's spec) in place: `cluster`, both
    selectors (`kubernetes.io/cluster/<cluster>: "*"`) and the default instance profile."""
    cluster = provider.get("cluster")
    if cluster is None:
        cluster = provider["cluster"] = {"name": cluster_name}
        if cluster_endpoint:
            cluster["endpoint"] = cluster_endpoint
    name = cluster.get("name") if isinstance(cluster, dict) else None
    selector = {f"kubernetes.io/cluster/{name or cluster_name}": "*"}
    for field_name in ("subnetSelector", "securityGroupSelector"):
        if provider.get(field_name) is None:
            provider[field_name] = dict(selector)
    if instance_profile and not provider.get("instanceProfile") and not provider.get("launchTemplate"):
        provider["instanceProfile"] = instance_profile


def canonical_key(key: str) -> str:
    return labels.normalize_key(key)
