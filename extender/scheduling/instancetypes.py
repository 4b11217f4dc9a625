"""The internal instance-type catalog entry: capacity, kubelet/system overhead, allocatable, offerings.

Capacity lists every resource kube-scheduler's NodeResourcesFit compares that an EC2 node has: a
resource missing here is allocatable 0 on the node, so a pod requesting it fits nowhere.

Overhead follows Karpenter's Bottlerocket-derived formulas (reference 1.11), with the kube-reserved
CPU tiers actually applied (0.5.x dropped them by a bug):
- node memory capacity = EC2 memory x (1 - 7.5 %) (VM/hypervisor overhead);
- kube-reserved CPU: 6 % of the 1st core, 1 % of the 2nd, 0.5 % of the 3rd-4th, 0.25 % above;
- kube-reserved memory: 11 MiB x max pods + 255 MiB; system-reserved 100m CPU / 100 MiB; eviction 100 MiB;
- max pods = what the VPC CNI allows (poddensity.py: ENIs of the default card, less reserved ENIs,
  x (IPv4 per ENI - 1) + 2, or the prefix-delegation count), unless the kubelet maxPods overrides it.

Ephemeral storage (Karpenter AWS `instancetype/types.go` ephemeralStorage/kubeReservedResources/
evictionThreshold, since #3568): capacity = the volume kubelet's nodefs lives on (the node
configuration's root/data volume, NodeClass.ephemeral_storage; 20 GiB by default), kube-reserved
1 GiB, eviction `nodefs.available` 10 % of capacity (the EKS AMIs' kubelet defaults), so a 20 GiB
volume leaves 17 GiB allocatable. A custom `launchTemplate` is assumed to keep the 20 GiB default.
The filesystem kubelet measures is slightly smaller than the volume (its metadata); Karpenter
ignores that too.

A Provisioner's kubelet settings (`NodeSettings.of`) change the numbers the way they change the
kubelet's own allocatable (capacity - kubeReserved - systemReserved - evictionHard): maxPods and
podsPerCore set the pod capacity; kubeReserved/systemReserved replace the computed values key by
key; evictionHard memory.available / nodefs.available replace the default thresholds (a percentage
is of capacity). kube-reserved memory counts the ENI-limited pods on AL2/AL2023/Ubuntu/Custom
(their bootstrap computes it before maxPods is applied) and the actual pod capacity on Bottlerocket.
Instance-store NVMe (`InstanceStorageInfo.TotalSizeInGB`) is counted only under `instanceStorePolicy:
RAID0` (Karpenter v0.34+): the user data then stripes those disks and puts kubelet's nodefs on them, so
a type with NVMe has that many GB (decimal, as Karpenter's `%dG`) of ephemeral storage; without the
policy the EKS AMIs leave them unmounted and nodefs is the root volume.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import NamedTuple

from extender.api import labels as wk
from extender.api.kubelet import KubeletConfiguration
from extender.api.nodeclass import BOTTLEROCKET, RAID0, NodeClass
from extender.api.quantity import parse_quantity
from extender.api.resources import CPU, EPHEMERAL_STORAGE, GPU_RESOURCES, MEMORY, PODS, Resources

MIB = 2**20
GIB = 2**30
VM_MEMORY_OVERHEAD = 0.075
SYSTEM_RESERVED_CPU = 0.1
SYSTEM_RESERVED_MEMORY_MIB = 100
EVICTION_THRESHOLD_MIB = 100
KUBE_RESERVED_MEMORY_PER_POD_MIB = 11
KUBE_RESERVED_MEMORY_BASE_MIB = 255
#: Karpenter's DefaultEBS volume size, the EKS AL2 AMI's root volume.
DEFAULT_ROOT_VOLUME = 20 * GIB
KUBE_RESERVED_EPHEMERAL_STORAGE = 1 * GIB
#: kubelet evictionHard nodefs.available, as a fraction of the node's ephemeral-storage capacity.
EVICTION_NODEFS_AVAILABLE = 0.10
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


@dataclass(frozen=True)
class NodeSettings:
    """What a Provisioner's node configuration changes in a type's capacity and overhead."""

    max_pods: int | None = None
    pods_per_core: int | None = None
    kube_reserved: Resources | None = None
    system_reserved: Resources | None = None
    #: evictionHard thresholds kubelet's allocatable subtracts: "100Mi" or "10%" (of capacity).
    eviction_memory: str = ""
    eviction_nodefs: str = ""
    root_volume: float = DEFAULT_ROOT_VOLUME
    #: `instanceStorePolicy: RAID0`: a type's instance-store NVMe is its nodefs (root_volume ignored).
    instance_store: bool = False
    #: Bottlerocket reserves kube memory for the pods it will run, the EKS AMIs for the ENI limit.
    reserve_for_max_pods: bool = False

    @classmethod
    def of(cls, kubelet: KubeletConfiguration, node_class: NodeClass) -> NodeSettings:
        def reserved(raw: Mapping[str, str]) -> Resources | None:
            return Resources.parse({k: v for k, v in raw.items() if k != "pid"}) if raw else None

        bottlerocket = node_class.family == BOTTLEROCKET
        return cls(
            max_pods=kubelet.max_pods,
            # Bottlerocket has no pods-per-core setting (Karpenter ignores it there too).
            pods_per_core=None if bottlerocket else kubelet.pods_per_core,
            kube_reserved=reserved(kubelet.kube_reserved),
            system_reserved=reserved(kubelet.system_reserved),
            eviction_memory=kubelet.eviction_hard.get("memory.available", ""),
            eviction_nodefs=kubelet.eviction_hard.get("nodefs.available", ""),
            root_volume=DEFAULT_ROOT_VOLUME if node_class.launch_template else node_class.ephemeral_storage(),
            instance_store=node_class.instance_store_policy == RAID0 and not node_class.launch_template,
            reserve_for_max_pods=bottlerocket,
        )


DEFAULT_NODE_SETTINGS = NodeSettings()


def _threshold(raw: str, capacity: float, default: float) -> float:
    if not raw:
        return default
    if raw.endswith("%"):
        # kubelet: a percentage of capacity; 100% would evict everything, Karpenter reads it as 0.
        fraction = float(raw[:-1]) / 100
        return 0.0 if fraction >= 1 else math.ceil(capacity * fraction)
    return parse_quantity(raw)


def node_overhead(
    vcpus: float,
    max_pods: int,
    root_volume: float = DEFAULT_ROOT_VOLUME,
    *,
    memory: float = 0.0,
    settings: NodeSettings = DEFAULT_NODE_SETTINGS,
) -> Resources:
    """kube-reserved + system-reserved + eviction threshold; `max_pods` is the pod count kube-reserved
    memory is computed for, `memory` the node's memory capacity (for a percentage threshold)."""
    kube = Resources(
        {
            CPU: kube_reserved_cpu(vcpus),
            MEMORY: (KUBE_RESERVED_MEMORY_PER_POD_MIB * max_pods + KUBE_RESERVED_MEMORY_BASE_MIB) * MIB,
            EPHEMERAL_STORAGE: KUBE_RESERVED_EPHEMERAL_STORAGE,
        }
    )
    system = Resources({CPU: SYSTEM_RESERVED_CPU, MEMORY: SYSTEM_RESERVED_MEMORY_MIB * MIB})
    if settings.kube_reserved:
        kube = Resources({**kube.amounts, **settings.kube_reserved.amounts})
    if settings.system_reserved:
        system = Resources({**system.amounts, **settings.system_reserved.amounts})
    eviction = Resources(
        {
            MEMORY: _threshold(settings.eviction_memory, memory, EVICTION_THRESHOLD_MIB * MIB),
            EPHEMERAL_STORAGE: _threshold(
                settings.eviction_nodefs, root_volume, math.ceil(root_volume * EVICTION_NODEFS_AVAILABLE)
            ),
        }
    )
    return kube + system + eviction


class OfferingKey(NamedTuple):
    """One (instance type, zone, capacity type) the cloud can launch: the one key for an offering,
    shared by the solver (`unavailable`), the cloud provider and the controllers. A tuple, so the
    solver can compare it with plain (type, zone, capacity type) tuples."""

    instance_type: str
    zone: str
    capacity_type: str


@dataclass(frozen=True)
class Offering:
    zone: str
    capacity_type: str
    price: float
    available: bool = True
    #: Where the price came from (see pricing.PriceBook), e.g. "file", "estimate", "spot-fraction".
    price_source: str = ""
    #: A `reserved` offering's capacity reservation and the instances it can still take
    #: (reservations.py); "" / 0 for on-demand and spot.
    reservation_id: str = ""
    reservation_capacity: int = 0
    #: The reservation's `default` / `capacity-block` and whether EC2 may reclaim it: with the id,
    #: the offering's values of the capacity-reservation labels (reservations.offering_labels).
    reservation_type: str = ""
    interruptible: bool = False


@dataclass(frozen=True)
class InstanceType:
    name: str
    #: vCPUs and EC2 memory in bytes as DescribeInstanceTypes reports them.
    cpu: float
    memory: float
    arch: str
    os: str = "linux"
    #: Accelerator counts by extended resource name (resources.ACCELERATOR_RESOURCES).
    gpus: Resources = field(default_factory=Resources)
    max_pods: int = 110
    capacity: Resources = field(default_factory=Resources)
    overhead: Resources = field(default_factory=Resources)
    allocatable: Resources = field(default_factory=Resources)
    offerings: tuple[Offering, ...] = ()
    #: CPU-credit (t-family) type: only a candidate when a requirement names it (see candidates.py).
    burstable: bool = False
    #: Other extended resources (vpc.amazonaws.com/efa): listed, but they do not reserve the type.
    extended: Resources = field(default_factory=Resources)
    #: Bytes of the volume kubelet's nodefs lives on (ephemeral-storage capacity).
    root_volume: float = DEFAULT_ROOT_VOLUME
    #: (CSI driver, volumes a new node of the type can attach) for the drivers whose limit is known
    #: before the node runs (attach.py); others are unlimited until its CSINode says otherwise.
    volume_limits: tuple[tuple[str, int], ...] = ()
    #: The cloud provider's labels for the type (karpenter.k8s.aws/*, instancelabels.py), sorted.
    type_labels: tuple[tuple[str, str], ...] = ()
    #: The ENI-limited pod count kube-reserved memory is computed for; 0 = max_pods.
    eni_pods: int = 0
    #: The pods the CNI gives the type before any kubelet setting (poddensity.py); 0 = max_pods.
    network_pods: int = 0
    #: The node settings capacity and overhead were computed under.
    settings: NodeSettings = DEFAULT_NODE_SETTINGS

    def volume_limit(self, driver: str) -> int | None:
        return next((count for name, count in self.volume_limits if name == driver), None)

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
        extended: Resources | None = None,
        root_volume: float = DEFAULT_ROOT_VOLUME,
        os: str = "linux",
        burstable: bool = False,
        volume_limits: tuple[tuple[str, int], ...] = (),
        type_labels: Mapping[str, str] | None = None,
        eni_pods: int = 0,
        settings: NodeSettings = DEFAULT_NODE_SETTINGS,
    ) -> InstanceType:
        """Derive capacity, overhead and allocatable from the raw figures; `max_pods` is the type's
        ENI-limited pod count unless `eni_pods` gives that, and `settings` may change the pods."""
        gpus = gpus or Resources()
        extended = extended or Resources()
        eni_pods = eni_pods or max_pods
        network_pods = max_pods
        nvme_gb = int((type_labels or {}).get(wk.INSTANCE_LOCAL_NVME) or 0) if settings.instance_store else 0
        if nvme_gb:
            root_volume = nvme_gb * 1e9
        max_pods = settings.max_pods or max_pods
        if settings.pods_per_core:
            max_pods = min(max_pods, settings.pods_per_core * math.ceil(cpu))
        node_memory = memory * (1 - VM_MEMORY_OVERHEAD)
        base = {CPU: cpu, MEMORY: node_memory, PODS: max_pods, EPHEMERAL_STORAGE: root_volume}
        capacity = Resources(base) + gpus + extended
        reserved_pods = max_pods if settings.reserve_for_max_pods else eni_pods
        overhead = node_overhead(cpu, reserved_pods, root_volume, memory=node_memory, settings=settings)
        return cls(
            name=name,
            cpu=cpu,
            memory=memory,
            arch=arch,
            os=os,
            gpus=gpus,
            extended=extended,
            root_volume=root_volume,
            max_pods=max_pods,
            capacity=capacity,
            overhead=overhead,
            allocatable=capacity - overhead,
            offerings=tuple(offerings),
            burstable=burstable,
            volume_limits=volume_limits,
            type_labels=tuple(sorted((type_labels or {}).items())),
            eni_pods=eni_pods,
            network_pods=network_pods,
            settings=settings,
        )

    def for_node(self, settings: NodeSettings) -> InstanceType:
        """The same type as a node under `settings` (a Provisioner's kubelet and node configuration)."""
        if settings == self.settings:
            return self
        return InstanceType.build(
            name=self.name,
            cpu=self.cpu,
            memory=self.memory,
            arch=self.arch,
            max_pods=self.network_pods or self.max_pods,
            eni_pods=self.eni_pods,
            offerings=self.offerings,
            gpus=self.gpus,
            extended=self.extended,
            root_volume=settings.root_volume,
            os=self.os,
            burstable=self.burstable,
            volume_limits=self.volume_limits,
            type_labels=dict(self.type_labels),
            settings=settings,
        )

    def with_max_pods(self, max_pods: int) -> InstanceType:
        """The same type under a kubelet maxPods override (kube-reserved memory depends on it)."""
        if max_pods == self.max_pods:
            return self
        return self.for_node(
            replace(self.settings, max_pods=max_pods, reserve_for_max_pods=True, root_volume=self.root_volume)
        )

    def with_offerings(self, offerings: Iterable[Offering]) -> InstanceType:
        return replace(self, offerings=tuple(offerings))

    @cached_property
    def reserved(self) -> tuple[Offering, ...]:
        """The offerings into capacity reservations (reservations.assign reads them per planned node)."""
        return tuple(o for o in self.offerings if o.reservation_id)

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
        return {**dict(self.type_labels), wk.INSTANCE_TYPE: self.name, wk.ARCH: self.arch, wk.OS: self.os}
