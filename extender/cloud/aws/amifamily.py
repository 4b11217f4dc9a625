"""Which AMI a node boots: per AMI family, Kubernetes version, architecture and accelerator from
the public SSM parameters each family publishes, or from the node configuration's `amiSelector`.

SSM paths (the root, `/aws/service`, is settings.aws.ssm_root so tests can mirror it in moto):
- AL2023: `eks/optimized-ami/<k8s>/amazon-linux-2023/<x86_64|arm64>/<standard|nvidia|neuron>/
  recommended/image_id`
- a v1 alias pinned to a version (`al2023@v20240625`) reads the family's versioned parameter
  instead of `recommended` (`latest` for Bottlerocket), as Karpenter v1 does
- AL2: `eks/optimized-ami/<k8s>/amazon-linux-2[-arm64|-gpu]/recommended/image_id` (none for 1.33+)
- Bottlerocket: `bottlerocket/aws-k8s-<k8s>[-nvidia]/<x86_64|arm64>/latest/image_id`
- Ubuntu: `canonical/ubuntu/eks/20.04/<k8s>/stable/current/<amd64|arm64>/hvm/ebs-gp2/ami-id`
Values and DescribeImages answers are cached for 60 s, so a newly published AMI is picked up
within a minute (and nodes launched before it are drifted; see `AMIResolver.resolve`).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cachetools import TTLCache

from extender.api import nodeclass as nc
from extender.api.resources import NEURON, NVIDIA_GPU
from extender.cloud.aws import errors
from extender.cloud.aws.selectors import CACHE_TTL_SECONDS, to_filters
from extender.cloud.types import CloudError
from extender.scheduling.instancetypes import InstanceType

#: An EKS optimized AMI release of AL2/AL2023 (the version a v1 alias pins): `v` and a date.
EKS_RELEASE = re.compile(r"v\d{8}")

STANDARD, NVIDIA, NEURON_VARIANT = "standard", "nvidia", "neuron"
#: The first Kubernetes minor version AWS publishes no EKS AL2 AMI for.
AL2_LAST_MINOR = 32
_EC2_ARCH = {"x86_64": "amd64", "arm64": "arm64"}


def variant(instance_type: InstanceType) -> str:
    """The accelerated image an instance type needs: NVIDIA drivers, Neuron drivers, or none."""
    if instance_type.gpus.get(NVIDIA_GPU):
        return NVIDIA
    return NEURON_VARIANT if instance_type.gpus.get(NEURON) else STANDARD


def ssm_path(
    root: str, family: str, kubernetes_version: str, arch: str, accelerator: str, version: str = ""
) -> str:
    """The SSM parameter holding the family's recommended AMI for this node shape, or the one of
    `version` (a v1 alias's pinned version, e.g. "v20240625"; Karpenter v1 `resolvePath`)."""
    root = root.rstrip("/")
    x86 = "x86_64" if arch == "amd64" else "arm64"
    k8s = kubernetes_version
    if family == nc.AL2023:
        # No arm64 Neuron image exists (no arm64 Neuron types either).
        accelerator = STANDARD if arch == "arm64" and accelerator == NEURON_VARIANT else accelerator
        name = f"amazon-eks-node-al2023-{x86}-{accelerator}-{k8s}-{version}" if version else "recommended"
        return f"{root}/eks/optimized-ami/{k8s}/amazon-linux-2023/{x86}/{accelerator}/{name}/image_id"
    if family == nc.AL2:
        if _minor(kubernetes_version) > AL2_LAST_MINOR:
            raise CloudError(
                f"resolving AMI, AWS publishes no AL2 EKS AMI for Kubernetes {kubernetes_version} "
                f"(1.{AL2_LAST_MINOR} is the last): use amiFamily AL2023 or Bottlerocket",
                code="AMIFamilyUnsupported",
            )
        # The accelerated AL2 image is x86_64 only: an arm64 GPU type (g5g) boots the arm64 image.
        segment, node = (
            ("amazon-linux-2-arm64", "amazon-eks-arm64-node")
            if arch == "arm64"
            else ("amazon-linux-2", "amazon-eks-node")
            if accelerator == STANDARD
            else ("amazon-linux-2-gpu", "amazon-eks-gpu-node")
        )
        name = f"{node}-{k8s}-{version}" if version else "recommended"
        return f"{root}/eks/optimized-ami/{k8s}/{segment}/{name}/image_id"
    if family == nc.BOTTLEROCKET:
        suffix = "-nvidia" if accelerator == NVIDIA else ""
        release = version.removeprefix("v") or "latest"
        return f"{root}/bottlerocket/aws-k8s-{k8s}{suffix}/{x86}/{release}/image_id"
    if family == nc.UBUNTU:
        return (
            f"{root}/canonical/ubuntu/eks/20.04/{kubernetes_version}/stable/current/{arch}/hvm/ebs-gp2/ami-id"
        )
    raise CloudError(
        f"resolving AMI, family {family} publishes no AMI: set amiSelector", code="NoAMISelector"
    )


def _minor(version: str) -> int:
    try:
        return int(version.split(".")[1])
    except (IndexError, ValueError):
        return 0


def describe_images_request(selector: Mapping[str, str]) -> dict[str, Any]:
    """DescribeImages arguments for a v1alpha5 amiSelector (Karpenter's keys: `aws-ids`/`aws::ids`,
    `aws::name`, `aws::owners`; every other key is a tag, "*" = has the tag)."""
    request: dict[str, Any] = {"Filters": [{"Name": "state", "Values": ["available"]}]}
    tags = {k: v for k, v in selector.items() if k not in ("aws-ids", "aws::ids", "aws::name", "aws::owners")}
    request["Filters"] += to_filters(tags)
    ids = selector.get("aws::ids") or selector.get("aws-ids")
    if ids:
        request["ImageIds"] = [part.strip() for part in ids.split(",") if part.strip()]
    if name := selector.get("aws::name"):
        request["Filters"].append({"Name": "name", "Values": [name]})
    if owners := selector.get("aws::owners"):
        request["Owners"] = [part.strip() for part in owners.split(",") if part.strip()]
    elif "aws::name" in selector:
        # A name alone could match anyone's public image.
        request["Owners"] = ["self", "amazon"]
    return request


def newest_by_arch(images: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """arch (amd64/arm64) -> the newest image's id (then the name, descending, as Karpenter)."""
    ordered = sorted(
        images, key=lambda i: (str(i.get("CreationDate", "")), str(i.get("Name", ""))), reverse=True
    )
    result: dict[str, str] = {}
    for image in ordered:
        arch = _EC2_ARCH.get(str(image.get("Architecture", "")))
        if arch and arch not in result:
            result[arch] = str(image["ImageId"])
    return result


class AMIResolver:
    """The AMI each instance type boots under a node configuration, now."""

    def __init__(
        self,
        ssm: Any,
        ec2: Any,
        *,
        ssm_root: str,
        kubernetes_version: Callable[[], str],
        timer: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ssm = ssm
        self._ec2 = ec2
        self._root = ssm_root
        self._kubernetes_version = kubernetes_version
        self._parameters: TTLCache[str, str] = TTLCache(maxsize=128, ttl=CACHE_TTL_SECONDS, timer=timer)
        self._selected: TTLCache[frozenset[tuple[str, str]], dict[str, str]] = TTLCache(
            maxsize=64, ttl=CACHE_TTL_SECONDS, timer=timer
        )
        self._lock = threading.Lock()

    def resolve(self, node_class: nc.NodeClass, instance_type: InstanceType) -> str:
        """The AMI id a node of `instance_type` launched under `node_class` boots now.

        Drift compares it with the AMI a node was launched from (the Node's
        `karpenter.k8s.aws/instance-ami-id` annotation). Raises CloudError when there is none.
        """
        if node_class.ami_selector:
            by_arch = self._select(node_class.ami_selector)
            if instance_type.arch not in by_arch:
                raise CloudError(
                    f"resolving AMI, no available {instance_type.arch} image matches amiSelector "
                    f"{dict(node_class.ami_selector)}",
                    code="NoMatchingAMI",
                )
            return by_arch[instance_type.arch]
        path = ssm_path(
            self._root,
            node_class.family,
            self._kubernetes_version(),
            instance_type.arch,
            variant(instance_type),
            node_class.ami_version,
        )
        return self._parameter(path)

    def by_arch(self, node_class: nc.NodeClass) -> dict[str, str]:
        """arch -> the AMI a standard (no accelerator) node of that arch boots now: what an
        EC2NodeClass reports in `status.amis`. An arch the family publishes none for is left out."""
        if node_class.ami_selector:
            return self._select(node_class.ami_selector)
        found = {}
        for arch in ("amd64", "arm64"):
            path = ssm_path(
                self._root,
                node_class.family,
                self._kubernetes_version(),
                arch,
                STANDARD,
                node_class.ami_version,
            )
            try:
                found[arch] = self._parameter(path)
            except CloudError:
                continue
        return found

    def missing(self, node_class: nc.NodeClass) -> str:
        """Why `by_arch` found nothing, naming what was looked for (the selector, or the SSM
        parameters of the family and release), for the EC2NodeClass's ResolutionFailed condition."""
        if node_class.ami_selector:
            return f"no available image matches amiSelectorTerms {dict(node_class.ami_selector)}"
        k8s = self._kubernetes_version()
        release = f" release {node_class.ami_version}" if node_class.ami_version else ""
        path = ssm_path(self._root, node_class.family, k8s, "amd64", STANDARD, node_class.ami_version)
        text = (
            f"no {node_class.family} AMI{release} for Kubernetes {k8s} (no SSM parameter {path}, nor arm64's)"
        )
        version = node_class.ami_version
        if version and node_class.family in (nc.AL2, nc.AL2023) and not EKS_RELEASE.fullmatch(version):
            alias = f"{node_class.family.lower()}@v20240807"
            text += (
                f"; an alias version is an EKS AMI release such as {alias}, not an OS release like {version}"
            )
        return text

    def resolve_all(self, node_class: nc.NodeClass, instance_types: Sequence[InstanceType]) -> dict[str, str]:
        """instance type name -> AMI id."""
        return {t.name: self.resolve(node_class, t) for t in instance_types}

    def _parameter(self, path: str) -> str:
        with self._lock:
            if path not in self._parameters:
                with errors.translated(f"getting AMI from SSM parameter {path}"):
                    self._parameters[path] = self._ssm.get_parameter(Name=path)["Parameter"]["Value"]
            return self._parameters[path]

    def _select(self, selector: Mapping[str, str]) -> dict[str, str]:
        key = frozenset(selector.items())
        with self._lock:
            if key not in self._selected:
                request = describe_images_request(selector)
                with errors.translated(f"describing images for amiSelector {dict(selector)}"):
                    images = self._ec2.describe_images(**request).get("Images", [])
                self._selected[key] = newest_by_arch(images)
            return self._selected[key]
