"""The internal instance-type catalog entry: capacity, kubelet/system overhead, allocatable, offerings.

Overhead follows Karpenter's Bottlerocket-derived formulas (reference 1.11), with the kube-reserved
CPU tiers actually applied (0.5.x dropped them by a bug):
- node memory capacity = EC2 memory x (1 - 7.5 %) (VM/hypervisor overhead);
- kube-reserved CPU: 6 % of the 1st core, 1 % of the 2nd, 0.5 % of the 3rd-4th, 0.25 % above;
- kube-reserved memory: 11 MiB x max pods + 255 MiB; system-reserved 100m CPU / 100 MiB; eviction 100 MiB;
- max pods = ENIs x (IPv4 per ENI - 1) + 2, unless the Provisioner's kubelet maxPods overrides it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from extender.api import labels as wk
from extender.api.resources import CPU, GPU_RESOURCES, MEMORY, PODS, Resources

MIB = 2**20
VM_MEMORY_OVERHEAD = 0.075
SYSTEM_RESERVED_CPU = 0.1
SYSTEM_RESERVED_MEMORY_MIB = 100
EVICTION_THRESHOLD_MIB = 100
KUBE_RESERVED_MEMORY_PER_POD_MIB = 11
KUBE_RESERVED_MEMORY_BASE_MIB = 255
# (cores covered by this tier, fraction of a core reserved per core in it)
KUBE_RESERVED_CPU_TIERS = ((1, 0.06), (1, 0.01), (2, 0.005), (float("inf"), 0.0025))


def kube_reserved_cpu(vcpus: float) -> float:
    reserved, remaining = 0.0, vcpus
    for cores, fraction in KUBE_RESERVED_CPU_TIERS:
        taken = min(remaining, cores)
        reserved += taken * fraction
        remaining -= taken
        if remaining <= 0:
            break
    return reserved


def eni_max_pods(enis: int, ipv4_per_eni: int) -> int:
    return enis * (ipv4_per_eni - 1) + 2


def node_overhead(vcpus: float, max_pods: int) -> Resources:
    """kube-reserved + system-reserved + eviction threshold."""
    memory_mib = (
        KUBE_RESERVED_MEMORY_PER_POD_MIB * max_pods
        + KUBE_RESERVED_MEMORY_BASE_MIB
        + SYSTEM_RESERVED_MEMORY_MIB
        + EVICTION_THRESHOLD_MIB
    )
    return Resources({CPU: kube_reserved_cpu(vcpus) + SYSTEM_RESERVED_CPU, MEMORY: memory_mib * MIB})


@dataclass(frozen=True)
class Offering:
    zone: str
    capacity_type: str
    price: float
    available: bool = True
    #: Where the price came from (see pricing.PriceBook), e.g. "file", "estimate", "spot-fraction".
    price_source: str = ""


@dataclass(frozen=True)
class InstanceType:
    name: str
    #: vCPUs and EC2 memory in bytes as DescribeInstanceTypes reports them.
    cpu: float
    memory: float
    arch: str
    os: str = "linux"
    #: GPU/accelerator counts by extended resource name (nvidia.com/gpu, amd.com/gpu, aws.amazon.com/neuron).
    gpus: Resources = field(default_factory=Resources)
    max_pods: int = 110
    capacity: Resources = field(default_factory=Resources)
    overhead: Resources = field(default_factory=Resources)
    allocatable: Resources = field(default_factory=Resources)
    offerings: tuple[Offering, ...] = ()
    #: CPU-credit (t-family) type: only a candidate when a requirement names it (see candidates.py).
    burstable: bool = False

    @classmethod
    def build(
        cls,
        *,
        name: str,
        cpu: float,
        memory: float,
        arch: str,
        max_pods: int,
        offerings: Iterable[Offering] = (),
        gpus: Resources | None = None,
        os: str = "linux",
        burstable: bool = False,
    ) -> InstanceType:
        """Derive capacity, overhead and allocatable from the raw figures."""
        gpus = gpus or Resources()
        capacity = Resources({CPU: cpu, MEMORY: memory * (1 - VM_MEMORY_OVERHEAD), PODS: max_pods}) + gpus
        overhead = node_overhead(cpu, max_pods)
        return cls(
            name=name,
            cpu=cpu,
            memory=memory,
            arch=arch,
            os=os,
            gpus=gpus,
            max_pods=max_pods,
            capacity=capacity,
            overhead=overhead,
            allocatable=capacity - overhead,
            offerings=tuple(offerings),
            burstable=burstable,
        )

    def with_max_pods(self, max_pods: int) -> InstanceType:
        """The same type under a kubelet maxPods override (kube-reserved memory depends on it)."""
        if max_pods == self.max_pods:
            return self
        rebuilt = InstanceType.build(
            name=self.name,
            cpu=self.cpu,
            memory=self.memory,
            arch=self.arch,
            max_pods=max_pods,
            offerings=self.offerings,
            gpus=self.gpus,
            os=self.os,
            burstable=self.burstable,
        )
        return rebuilt

    def with_offerings(self, offerings: Iterable[Offering]) -> InstanceType:
        return replace(self, offerings=tuple(offerings))

    @property
    def has_gpu(self) -> bool:
        return any(self.gpus.get(name) for name in GPU_RESOURCES)

    def fits_overhead(self) -> str | None:
        """Why this type cannot even hold its own kubelet/system overhead, or None."""
        for name in (CPU, MEMORY):
            if self.allocatable.get(name) <= 0:
                overhead, capacity = self.overhead.get(name), self.capacity.get(name)
                return f"overhead {name} {overhead:g} exceeds capacity {capacity:g}"
        return None

    def labels(self) -> dict[str, str]:
        return {wk.INSTANCE_TYPE: self.name, wk.ARCH: self.arch, wk.OS: self.os}
