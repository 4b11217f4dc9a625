"""What karpy is compared with: a Karpenter-0.5-style First-Fit-Descending packer and a Cluster
Autoscaler-style single node group, both on the same catalog and prices as karpy.

Both work on runs of identical pods (`Run`), which is exact for these packers: identical pods are
placed one after another, so placing k of them at once changes nothing but the speed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from benchmarks.catalogview import (
    GPU,
    Vector,
    alloc_of,
    allowed_types,
    cheapest_price,
    fit_count,
    groups,
    request_of,
)
from extender.api.pod import Pod
from extender.scheduling.instancetypes import InstanceType

#: Karpenter 0.5 (AWS provider) only discovered these families (v0.5.4 adds i3).
KARPENTER_FAMILIES = ("m", "c", "r", "a", "t3", "t4", "p", "inf", "g", "i3")
#: Options per CreateFleet; the fleet launches the cheapest option (lowest-price allocation).
KARPENTER_MAX_OPTIONS = 20


@dataclass
class Run:
    request: Vector
    left: int


@dataclass(frozen=True)
class Outcome:
    price: float
    nodes: int
    unschedulable: int


def _runs(pods: Sequence[Pod]) -> list[Run]:
    """Runs of identical requests, largest cpu first then memory (Karpenter's pod order)."""
    counts: dict[Vector, int] = {}
    for pod in pods:
        request = request_of(pod)
        counts[request] = counts.get(request, 0) + 1
    return [Run(r, n) for r, n in sorted(counts.items(), key=lambda item: (-item[0][0], -item[0][1]))]


def _fill(alloc: Vector, runs: Sequence[Run]) -> list[int]:
    """Karpenter's Packable.Pack over runs: each pod that fits is reserved, the others skipped."""
    free = list(alloc)
    taken = []
    for run in runs:
        count = min(run.left, fit_count(run.request, tuple(free))) if run.left else 0
        taken.append(count)
        if count:
            free = [f - count * r for f, r in zip(free, run.request, strict=True)]
    return taken


def karpenter_ffd(
    pods: Sequence[Pod], catalog: Sequence[InstanceType], capacity_types: Sequence[str]
) -> Outcome:
    """Karpenter 0.5's packer (binpacking/packer.go): each node is the smallest type (types sorted by
    cpu then memory) that holds as many pods as the largest type would; the fleet then launches the
    cheapest of that type and the next 19 larger ones that holds the node's pods."""
    price, nodes, unschedulable = 0.0, 0, 0
    for (arch, gpu), group in groups(pods).items():
        types = [
            t
            for t in allowed_types(catalog, arch=arch, gpu=gpu, capacity_types=capacity_types, burstable=True)
            if t.name.startswith(KARPENTER_FAMILIES)
        ]
        types.sort(key=lambda t: (t.allocatable.cpu, t.allocatable.memory))
        allocs = [alloc_of(t) for t in types]
        runs = _runs(group)
        while any(r.left for r in runs):
            most = sum(_fill(allocs[-1], runs)) if types else 0
            if not most:
                first = next(r for r in runs if r.left)
                first.left -= 1
                unschedulable += 1
                continue
            index, taken = next((i, t) for i, a in enumerate(allocs) if sum(t := _fill(a, runs)) == most)
            used = [sum(n * r.request[d] for n, r in zip(taken, runs, strict=True)) for d in range(4)]
            options = range(index, min(index + KARPENTER_MAX_OPTIONS, len(types)))
            price += min(
                cheapest_price(types[i], capacity_types)
                for i in options
                if all(u <= a + 1e-9 for u, a in zip(used, allocs[i], strict=True))
            )
            nodes += 1
            for run, n in zip(runs, taken, strict=True):
                run.left -= n
    return Outcome(price, nodes, unschedulable)


def node_group(pods: Sequence[Pod], node_type: InstanceType) -> Outcome:
    """Cluster Autoscaler with one on-demand node group of `node_type`: FFD into identical nodes; pods
    the group's nodes cannot run (GPU, another arch, too large) stay pending."""
    alloc = alloc_of(node_type)
    runnable = [
        p
        for p in pods
        if not p.requests.get(GPU)
        and p.node_selector.get("kubernetes.io/arch", node_type.arch) == node_type.arch
    ]
    unschedulable = len(pods) - len(runnable)
    free: list[list[float]] = []
    for run in _runs(runnable):
        if not fit_count(run.request, alloc):
            unschedulable += run.left
            continue
        for slot in free:
            count = min(run.left, fit_count(run.request, tuple(slot)))
            slot[:] = [s - count * r for s, r in zip(slot, run.request, strict=True)]
            run.left -= count
        while run.left:
            count = min(run.left, fit_count(run.request, alloc))
            free.append([a - count * r for a, r in zip(alloc, run.request, strict=True)])
            run.left -= count
    return Outcome(len(free) * cheapest_price(node_type, ("on-demand",)), len(free), unschedulable)
