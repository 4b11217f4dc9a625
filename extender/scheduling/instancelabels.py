"""The `karpenter.k8s.aws/*` labels of one raw DescribeInstanceTypes item.

Derived as Karpenter's AWS provider derives its instance-type requirements
(`pkg/providers/instancetype/types.go computeRequirements`): a figure the item lacks (no GPU, no
instance store, more than one GPU model) gives no label, so `DoesNotExist` holds for the type.
Network bandwidth is the baseline the network cards report, in Mbit/s: the figure Karpenter's
generated table (`zz_generated.bandwidth.go`) holds for each type, read from the API instead.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from extender.api import labels as wk

#: category, optional "-<n>tb" (u-6tb1), generation: `m5d.large` -> m, 5.
_SCHEME = re.compile(r"(^[a-z]+)(\-[0-9]+tb)?([0-9]+).*\.")


def _kebab(value: object) -> str:
    return str(value).replace(" ", "-").lower()


def _single(entries: Any) -> Mapping[str, Any] | None:
    """The one entry of a list, or None (Karpenter labels a device only when the type has one kind)."""
    return entries[0] if isinstance(entries, list) and len(entries) == 1 else None


def _name_labels(name: str) -> dict[str, str]:
    labels: dict[str, str] = {}
    if match := _SCHEME.match(name):
        labels[wk.INSTANCE_CATEGORY], labels[wk.INSTANCE_GENERATION] = match.group(1), match.group(3)
    family, dot, size = name.partition(".")
    if dot and "." not in size:
        labels[wk.INSTANCE_FAMILY], labels[wk.INSTANCE_SIZE] = family, size
        labels[wk.INSTANCE_CAPABILITY_FLEX] = str("-flex" in family).lower()
    return labels


def _device_labels(item: Mapping[str, Any]) -> dict[str, str]:
    labels: dict[str, str] = {}
    if gpu := _single((item.get("GpuInfo") or {}).get("Gpus")):
        labels[wk.INSTANCE_GPU_NAME] = _kebab(gpu.get("Name", ""))
        labels[wk.INSTANCE_GPU_MANUFACTURER] = _kebab(gpu.get("Manufacturer", ""))
        labels[wk.INSTANCE_GPU_COUNT] = str(gpu.get("Count") or 0)
        labels[wk.INSTANCE_GPU_MEMORY] = str((gpu.get("MemoryInfo") or {}).get("SizeInMiB") or 0)
    neuron = item.get("NeuronInfo")
    if neuron is not None:
        device, manufacturer = _single(neuron.get("NeuronDevices")), "aws"
    else:
        device = _single((item.get("InferenceAcceleratorInfo") or {}).get("Accelerators"))
        manufacturer = _kebab(device.get("Manufacturer", "")) if device else ""
    if device:
        labels[wk.INSTANCE_ACCELERATOR_NAME] = _kebab(device.get("Name", ""))
        labels[wk.INSTANCE_ACCELERATOR_MANUFACTURER] = manufacturer
        labels[wk.INSTANCE_ACCELERATOR_COUNT] = str(device.get("Count") or 0)
    return labels


def instance_labels(item: Mapping[str, Any]) -> dict[str, str]:
    """Label key -> value for one DescribeInstanceTypes item (only the labels the type has)."""
    labels = _name_labels(str(item.get("InstanceType", "")))
    labels[wk.INSTANCE_CPU] = str(item["VCpuInfo"]["DefaultVCpus"])
    labels[wk.INSTANCE_MEMORY] = str(item["MemoryInfo"]["SizeInMiB"])
    processor = item.get("ProcessorInfo") or {}
    if manufacturer := processor.get("Manufacturer"):
        labels[wk.INSTANCE_CPU_MANUFACTURER] = _kebab(manufacturer)
    if clock := processor.get("SustainedClockSpeedInGhz"):
        labels[wk.INSTANCE_CPU_CLOCK] = str(round(float(clock) * 1000))
    if hypervisor := item.get("Hypervisor"):
        labels[wk.INSTANCE_HYPERVISOR] = str(hypervisor)
    network = item.get("NetworkInfo") or {}
    labels[wk.INSTANCE_ENCRYPTION_IN_TRANSIT] = str(bool(network.get("EncryptionInTransitSupported"))).lower()
    cards = [c.get("BaselineBandwidthInGbps") for c in network.get("NetworkCards") or ()]
    if cards and all(c is not None for c in cards):
        labels[wk.INSTANCE_NETWORK_BANDWIDTH] = str(round(sum(float(c) for c in cards) * 1000))
    storage = item.get("InstanceStorageInfo")
    if storage and storage.get("NvmeSupport") != "unsupported":
        labels[wk.INSTANCE_LOCAL_NVME] = str(storage.get("TotalSizeInGB") or 0)
    ebs = item.get("EbsInfo") or {}
    if ebs.get("EbsOptimizedSupport") == "default" and (optimized := ebs.get("EbsOptimizedInfo")):
        labels[wk.INSTANCE_EBS_BANDWIDTH] = str(optimized.get("MaximumBandwidthInMbps") or 0)
    return {**labels, **_device_labels(item)}
