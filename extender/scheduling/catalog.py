"""Raw EC2 JSON (DescribeInstanceTypes + DescribeInstanceTypeOfferings) -> list[InstanceType], once.

Input items are what boto3 returns (same keys as the AWS JSON). Kept: HVM types with an x86_64
or arm64 processor, not bare metal, no FPGA (as Karpenter 0.5). Each kept type gets one Offering
per (zone, capacity type) from its zonal offerings x SupportedUsageClasses, priced by the PriceBook.
Called by the cloud provider's instance-type cache and by `karpy plan`.

Extended resources, as Karpenter's AWS provider derives them (`instancetype/types.go`
computeCapacity): nvidia.com/gpu, amd.com/gpu and habana.ai/gaudi from `GpuInfo.Gpus` by
manufacturer; aws.amazon.com/neuron = Neuron devices (`NeuronInfo`, else the older
`InferenceAcceleratorInfo`) and aws.amazon.com/neuroncore = devices x `CoreInfo.Count`, the two
names the Neuron device plugin registers; vpc.amazonaws.com/efa = `EfaInfo.MaximumEfaInterfaces`.
Each needs its device plugin on the node, as in Karpenter. Ephemeral storage: see instancetypes.py.
Labels (`karpenter.k8s.aws/instance-category`, ...): see instancelabels.py.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from extender.api.labels import CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_SPOT
from extender.api.resources import (
    AMD_GPU,
    EFA,
    HABANA_GAUDI,
    NEURON,
    NEURON_CORE,
    NVIDIA_GPU,
    Resources,
)
from extender.scheduling import attach
from extender.scheduling.instancelabels import instance_labels
from extender.scheduling.instancetypes import MIB, InstanceType, Offering
from extender.scheduling.poddensity import DEFAULT_DENSITY, PodDensity, pods_for
from extender.scheduling.pricing import PriceBook, Shape

ARCHITECTURES = {"x86_64": "amd64", "arm64": "arm64"}
USAGE_CLASSES = (CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_SPOT)
GPU_MANUFACTURERS = {"NVIDIA": NVIDIA_GPU, "AMD": AMD_GPU, "HABANA": HABANA_GAUDI}


class CatalogError(ValueError):
    """An instance type item missing a field karpy needs."""


def _arch(item: Mapping[str, Any]) -> str | None:
    for arch in item.get("ProcessorInfo", {}).get("SupportedArchitectures", ()):
        if arch in ARCHITECTURES:
            return ARCHITECTURES[arch]
    return None


def _skip_reason(item: Mapping[str, Any]) -> str | None:
    if item.get("BareMetal"):
        return "bare metal"
    if item.get("FpgaInfo"):
        return "FPGA"
    virtualization = item.get("SupportedVirtualizationTypes")
    if virtualization is not None and "hvm" not in virtualization:
        return "not HVM"
    if _arch(item) is None:
        return "no x86_64/arm64 processor"
    return None


def _gpus(item: Mapping[str, Any]) -> Resources:
    """Accelerator counts (resources.ACCELERATOR_RESOURCES)."""
    amounts: dict[str, float] = defaultdict(float)
    for gpu in (item.get("GpuInfo") or {}).get("Gpus") or ():
        name = GPU_MANUFACTURERS.get(str(gpu.get("Manufacturer", "")).upper())
        if name:
            amounts[name] += gpu.get("Count") or 0
    for device in (item.get("NeuronInfo") or {}).get("NeuronDevices") or ():
        count = device.get("Count") or 0
        amounts[NEURON] += count
        amounts[NEURON_CORE] += count * ((device.get("CoreInfo") or {}).get("Count") or 0)
    if NEURON not in amounts:
        # Older responses describe Inferentia only here, without a core count.
        for accel in (item.get("InferenceAcceleratorInfo") or {}).get("Accelerators") or ():
            amounts[NEURON] += accel.get("Count") or 0
    return Resources(dict(amounts))


def _extended(item: Mapping[str, Any]) -> Resources:
    """Extended resources that do not make a type an accelerator type: EFA interfaces."""
    network = item.get("NetworkInfo") or {}
    if network.get("EfaSupported") is False:
        return Resources()
    return Resources({EFA: (network.get("EfaInfo") or {}).get("MaximumEfaInterfaces") or 0})


def _zones_by_type(
    offerings: Sequence[Mapping[str, Any]] | None, zones: Sequence[str]
) -> dict[str, list[str]] | None:
    if offerings is None:
        return None
    result: dict[str, list[str]] = defaultdict(list)
    for offering in offerings:
        if offering.get("LocationType", "availability-zone") != "availability-zone":
            continue
        zone = str(offering.get("Location", ""))
        if not zones or zone in zones:
            result[str(offering.get("InstanceType"))].append(zone)
    return result


def build_catalog(
    instance_types: Sequence[Mapping[str, Any]],
    *,
    offerings: Sequence[Mapping[str, Any]] | None,
    zones: Sequence[str],
    prices: PriceBook,
    logger: logging.Logger | None = None,
    density: PodDensity = DEFAULT_DENSITY,
) -> list[InstanceType]:
    """Instance types with their offerings, sorted by name; types with no offering are dropped.

    Without `offerings` every type is offered in every zone of `zones`; with them, in the zones
    listed for it (restricted to `zones` when that is non-empty). `density` sets the pods per
    node (poddensity.py).
    """
    zones_by_type = _zones_by_type(offerings, zones)
    result = []
    for item in instance_types:
        name = item.get("InstanceType")
        if not name:
            raise CatalogError("instance type item without InstanceType")
        if reason := _skip_reason(item):
            if logger:
                logger.debug("Excluding instance type %s: %s", name, reason)
            continue
        try:
            vcpus = float(item["VCpuInfo"]["DefaultVCpus"])
            memory = float(item["MemoryInfo"]["SizeInMiB"]) * MIB
            pods = pods_for(item, density)
        except (KeyError, TypeError, ValueError) as err:
            raise CatalogError(f"instance type {name}: missing or bad field {err}") from err
        arch = _arch(item) or "amd64"
        gpus = _gpus(item)
        shape = Shape(
            cpu=vcpus,
            memory_gib=memory / 2**30,
            arch=arch,
            gpus=gpus.get(NVIDIA_GPU) + gpus.get(AMD_GPU) + gpus.get(HABANA_GAUDI),
            neurons=gpus.get(NEURON),
        )
        type_zones = sorted(set(zones)) if zones_by_type is None else sorted(set(zones_by_type.get(name, ())))
        usage = [u for u in USAGE_CLASSES if u in item.get("SupportedUsageClasses", USAGE_CLASSES)]
        type_offerings = []
        for zone in type_zones:
            for capacity_type in usage:
                price = prices.price(name, capacity_type, shape, zone)
                type_offerings.append(Offering(zone, capacity_type, price.value, True, price.source))
        if not type_offerings:
            if logger:
                logger.debug("Excluding instance type %s: not offered in zones %s", name, list(zones))
            continue
        instance_type = InstanceType.build(
            name=name,
            cpu=vcpus,
            memory=memory,
            arch=arch,
            max_pods=pods.max_pods,
            eni_pods=pods.eni_limited,
            offerings=type_offerings,
            gpus=gpus,
            extended=_extended(item),
            burstable=bool(item.get("BurstablePerformanceSupported")),
            volume_limits=((attach.EBS_CSI_DRIVER, attach.ebs_limit(item)),),
            type_labels=instance_labels(item),
        )
        if reason := instance_type.fits_overhead():
            if logger:
                logger.debug(
                    "Excluding instance type %s: not enough resources for kubelet and system overhead (%s)",
                    name,
                    reason,
                )
            continue
        result.append(instance_type)
    return sorted(result, key=lambda t: t.name)
