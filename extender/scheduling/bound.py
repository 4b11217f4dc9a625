"""The lower bound a plan reports: no plan for the pods placed on new nodes costs less.

Built from the round's classes (what each pod may use, at what price) with the bounds of
lowerbound.py; it only reports how far a plan may be from optimal, and decides nothing.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

from extender.scheduling import lowerbound
from extender.scheduling.candidates import CandidateCache, Vector, fit_count
from extender.scheduling.fill import PodClass


def plan_bound(placed: Collection[str], classes: Sequence[PodClass], cache: CandidateCache) -> float:
    """The largest of three valid bounds (lowerbound.py) on the new nodes' $/h for the pods placed on them.

    A type's capacity is the largest allocatable any Provisioner gives it and its price the
    cheapest offering any of its pods' requirement sets allow, so every real node is within the
    relaxation. Types are those the packer may use for each class (`CandidateCache.usable`: priced
    ones, estimated ones only for pods no priced type holds). Shapes are pooled by request vector
    (allowing the union of their types), which
    only loosens the bound, so the knapsacks stay few.

    Hostname anti-affinity: the pods that carry a term and match its selector may not share a
    node (`Packer.topology_cap` refuses a second one, as the kube-scheduler would). In the
    whole-pod bound each such pod requests 1 of an exclusivity dimension of which every type
    supplies 1; and the plan needs at least as many nodes as the largest such group has pods,
    which `node_count_bound` charges. Pods that only carry or only match a term are left
    unconstrained, which loosens the bounds but keeps them valid.
    """
    groups = sorted({t for c in classes for t in c.host.repels if t in c.matches})
    exclusive = tuple(1.0 for _ in groups)
    supplies: dict[str, lowerbound.Supply] = {}
    pooled: dict[Vector, tuple[int, set[str], float]] = {}
    seen: set[int] = set()
    for pod_class in classes:
        count = sum(1 for p in pod_class.pods if p.key in placed)
        if not count or pod_class.reqs is None or pod_class.view is None:
            continue
        found = cache.lookup(pod_class.view, pod_class.reqs, pod_class.gpus)
        request = pod_class.request + tuple(
            1.0 if g in pod_class.host.repels and g in pod_class.matches else 0.0 for g in groups
        )
        usable = cache.usable(found, pod_class.request)
        total, names, rate = pooled.get(request, (0, set(), math.inf))
        names.update(c.entry.type.name for c in usable)
        rate = min(rate, cache.pod_rate(found, pod_class.request))
        pooled[request] = (total + count, names, rate)
        if id(usable) in seen:
            continue
        seen.add(id(usable))
        for c in usable:
            capacity = tuple(max(0.0, a) for a in c.entry.alloc) + exclusive
            old_capacity, old_price = supplies.get(c.entry.type.name, (capacity, c.offering.price))
            supplies[c.entry.type.name] = (
                tuple(max(a, b) for a, b in zip(old_capacity, capacity, strict=True)),
                min(old_price, c.offering.price),
            )
    if not pooled:
        return 0.0
    dims = len(next(iter(pooled))) - len(groups)
    shapes = [
        lowerbound.PodShape(request, count, frozenset(names), rate if math.isfinite(rate) else 1.0)
        for request, (count, names, rate) in pooled.items()
    ]
    demand = [sum(s.count * s.request[d] for s in shapes) for d in range(dims)]
    resources = [(capacity[:dims], price) for capacity, price in supplies.values()]
    cover = lowerbound.cover_cost(demand, resources)
    # The pods of one exclusive group sit on distinct nodes, so the plan has at least that many.
    # Cpu and memory only: with every type Pareto-efficient once prices drop, more dimensions
    # make the cover LP's basis enumeration far slower, and dropping one only loosens the bound.
    nodes = max((sum(s.count for s in shapes if s.request[dims + g]) for g in range(len(groups))), default=0)
    # One shape's pods alone, in whole nodes: exact for a batch of one shape.
    alone = (
        lowerbound.shape_cover_bound(
            s.count,
            [(fit_count(s.request, supplies[n][0]), supplies[n][1]) for n in s.types if n in supplies],
        )
        for s in shapes
    )
    return max(
        cover if math.isfinite(cover) else 0.0,
        max((b for b in alone if math.isfinite(b)), default=0.0),
        lowerbound.pattern_bound(shapes, supplies),
        lowerbound.node_count_bound(demand[:2], nodes, [(c[:2], p) for c, p in resources]) if nodes else 0.0,
    )
