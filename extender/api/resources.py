"""Resource lists as immutable mappings of resource name -> amount (cpu in cores, memory in bytes)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from extender.api.quantity import format_cpu, format_memory, parse_quantity

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
EPHEMERAL_STORAGE = "ephemeral-storage"
#: Extended resources advertised by device plugins, named as Karpenter's AWS provider names them.
NVIDIA_GPU = "nvidia.com/gpu"
AMD_GPU = "amd.com/gpu"
#: Neuron device plugin: whole Inferentia/Trainium devices, and single NeuronCores.
NEURON = "aws.amazon.com/neuron"
NEURON_CORE = "aws.amazon.com/neuroncore"
HABANA_GAUDI = "habana.ai/gaudi"
#: EFA device plugin: Elastic Fabric Adapter interfaces.
EFA = "vpc.amazonaws.com/efa"
#: Devices whose types need the accelerated (-gpu) AMI.
GPU_RESOURCES = (NVIDIA_GPU, AMD_GPU, NEURON)
#: Devices whose types only serve pods that request one of them (see scheduling/candidates.py).
ACCELERATOR_RESOURCES = (NVIDIA_GPU, AMD_GPU, NEURON, NEURON_CORE, HABANA_GAUDI)
#: What a node's capacity can list, so what a Provisioner's limits can count (Karpenter counts a
#: limit over its nodes' capacity).
COUNTABLE = (CPU, MEMORY, PODS, EPHEMERAL_STORAGE, *ACCELERATOR_RESOURCES, EFA)
#: Karpenter's `limits.nodes` (designs/nodepool-node-limits.md): a count of nodes, each node counting 1.
NODES = "nodes"
#: What limits may name: the countable resources and the node count.
LIMITABLE = (*COUNTABLE, NODES)


@dataclass(frozen=True)
class Resources:
    """An immutable resource list; missing names are 0."""

    amounts: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "amounts", MappingProxyType({k: v for k, v in self.amounts.items() if v}))

    @classmethod
    def parse(cls, raw: Mapping[str, str | int | float] | None) -> Resources:
        """From a Kubernetes resource list ({"cpu": "500m", "memory": "1Gi"}); raises QuantityError."""
        return cls({name: parse_quantity(value) for name, value in (raw or {}).items()})

    @classmethod
    def of(cls, **amounts: float) -> Resources:
        return cls({k.replace("_", "/") if k == "nvidia_gpu" else k: v for k, v in amounts.items()})

    def get(self, name: str) -> float:
        return self.amounts.get(name, 0.0)

    @property
    def cpu(self) -> float:
        return self.get(CPU)

    @property
    def memory(self) -> float:
        return self.get(MEMORY)

    def __add__(self, other: Resources) -> Resources:
        keys = set(self.amounts) | set(other.amounts)
        return Resources({k: self.get(k) + other.get(k) for k in keys})

    def __sub__(self, other: Resources) -> Resources:
        keys = set(self.amounts) | set(other.amounts)
        return Resources({k: self.get(k) - other.get(k) for k in keys})

    def fits_in(self, capacity: Resources) -> bool:
        """True when every requested amount is within capacity (a small epsilon absorbs float error)."""
        return all(v <= capacity.get(k) + 1e-9 for k, v in self.amounts.items())

    def maximum(self, other: Resources) -> Resources:
        keys = set(self.amounts) | set(other.amounts)
        return Resources({k: max(self.get(k), other.get(k)) for k in keys})

    def names(self) -> frozenset[str]:
        return frozenset(self.amounts)

    def __bool__(self) -> bool:
        return bool(self.amounts)


def total(items: Iterable[Resources]) -> Resources:
    result = Resources()
    for item in items:
        result = result + item
    return result


def _quantity(name: str, amount: float) -> str:
    if name == CPU:
        return format_cpu(amount)
    if name == MEMORY:
        # Whole KiB: the catalog's memory is a fraction of the EC2 figure and need not be integral.
        return format_memory(int(amount // 1024) * 1024)
    return str(int(amount))


def resource_list(resources: Resources) -> dict[str, str]:
    """A Kubernetes ResourceList (API JSON quantities) of `resources`, names sorted."""
    return {name: _quantity(name, amount) for name, amount in sorted(resources.amounts.items())}
