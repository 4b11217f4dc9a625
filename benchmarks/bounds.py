"""The benchmark's lower bound: the fractional LP on price over cpu, memory and pods (and GPUs).

min sum(price_t x_t) s.t. sum(x_t allocatable_t) >= the pods' total requests, x >= 0, over the
priced types the pods may use (catalogview.allowed_types), real prices. Pods are grouped by what
they may run on (arch selector, GPU); groups whose type sets overlap are pooled over the union of
their types, which only loosens the bound, and the pooled groups' bounds add up (no type serves
two of them). Solved exactly by `lowerbound.cover_cost` (basis enumeration).
"""

from __future__ import annotations

from collections.abc import Sequence

from benchmarks.catalogview import alloc_of, allowed_types, cheapest_price, groups, request_of
from extender.api.pod import Pod
from extender.scheduling.instancetypes import InstanceType
from extender.scheduling.lowerbound import cover_cost


def lp_bound(pods: Sequence[Pod], catalog: Sequence[InstanceType], capacity_types: Sequence[str]) -> float:
    pools: list[tuple[set[str], list[Pod], dict[str, InstanceType]]] = []
    for (arch, gpu), group in groups(pods).items():
        types = {t.name: t for t in allowed_types(catalog, arch=arch, gpu=gpu, capacity_types=capacity_types)}
        names = set(types)
        for pool in [p for p in pools if p[0] & names]:
            pools.remove(pool)
            names |= pool[0]
            group = group + pool[1]
            types.update(pool[2])
        pools.append((names, group, types))
    total = 0.0
    for _, group, types in pools:
        requests = [request_of(p) for p in group]
        demand = [sum(r[d] for r in requests) for d in range(4)]
        supplies = [(alloc_of(t), cheapest_price(t, capacity_types)) for t in types.values()]
        total += cover_cost(demand, supplies)
    return total
