"""The benchmark's own reading of the catalog: which types a pod group may use, at what price.

Independent of the solver's internals on purpose, so the baselines and the lower bound do not
inherit a mistake from the code they measure. The rules are karpy's defaults: a GPU type serves
only GPU pods (and a GPU pod needs one), an arch selector restricts the arch, only offerings of the
Provisioner's capacity types count, burstable (t-family) types only where stated, and types priced
by the estimate (in no price table) are left out.
"""

from __future__ import annotations

from collections.abc import Sequence

from extender.api.pod import Pod
from extender.scheduling.instancetypes import InstanceType
from extender.scheduling.pricing import ESTIMATE

Vector = tuple[float, ...]


GPU = "nvidia.com/gpu"


def request_of(pod: Pod) -> Vector:
    """cpu, memory, one pod slot, NVIDIA GPUs."""
    return (pod.requests.cpu, pod.requests.memory, 1.0, pod.requests.get(GPU))


def alloc_of(instance_type: InstanceType) -> Vector:
    """What a node of the type offers in `request_of`'s dimensions (no DaemonSets in the benchmark)."""
    a = instance_type.allocatable
    return (a.cpu, a.memory, float(instance_type.max_pods), a.get(GPU))


def fit_count(request: Vector, free: Vector) -> int:
    count = 1 << 30
    for r, f in zip(request, free, strict=True):
        if r > 0:
            count = min(count, int((f + 1e-9) // r))
    return max(count, 0)


def cheapest_price(instance_type: InstanceType, capacity_types: Sequence[str]) -> float:
    return min(
        o.price
        for o in instance_type.offerings
        if o.capacity_type in capacity_types and o.available and o.price_source != ESTIMATE
    )


def allowed_types(
    catalog: Sequence[InstanceType],
    *,
    arch: str,
    gpu: bool,
    capacity_types: Sequence[str],
    burstable: bool = False,
) -> list[InstanceType]:
    return [
        t
        for t in catalog
        if (not arch or t.arch == arch)
        and bool(t.gpus.get(GPU)) == gpu
        and not (t.gpus.names() - {GPU})
        and (burstable or not t.burstable)
        and any(
            o.capacity_type in capacity_types and o.available and o.price_source != ESTIMATE
            for o in t.offerings
        )
    ]


def groups(pods: Sequence[Pod]) -> dict[tuple[str, bool], list[Pod]]:
    """Pods by (arch selector, asks for a GPU): what decides the types they may run on."""
    result: dict[tuple[str, bool], list[Pod]] = {}
    for pod in pods:
        key = (pod.node_selector.get("kubernetes.io/arch", ""), bool(pod.requests.get(GPU)))
        result.setdefault(key, []).append(pod)
    return result
