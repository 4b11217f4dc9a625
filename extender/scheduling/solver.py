"""solve(): pending pods + Provisioners + catalog -> Plan. Pure: no API calls, no clock, no globals.

Steps: resolve each distinct pod shape to a Provisioner and a requirement set (required terms in
order, preferred terms relaxed lightest-first), pin zone-constrained pods to zones, pack classes of
identical pods First-Fit-Descending (existing nodes first), apply Provisioner limits, then give
every new node its options (cheapest first) and price, and bound the cost from below.
Called by the provisioning worker and `karpy plan`.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence

from extender.api import labels as wk
from extender.api.pod import Pod
from extender.api.provisioner import Provisioner
from extender.api.resources import CPU, MEMORY, PODS, Resources
from extender.scheduling import lowerbound
from extender.scheduling.candidates import (
    Candidate,
    CandidateCache,
    OfferingKey,
    ProvisionerView,
    Vector,
    fits,
    gpu_kinds,
    vector,
)
from extender.scheduling.constraints import describe_taint, pod_terms, preferences
from extender.scheduling.instancetypes import InstanceType
from extender.scheduling.packer import Node, Packer, PodClass
from extender.scheduling.plan import ExistingNode, Plan, PlannedNode, Unschedulable
from extender.scheduling.provisioners import ordered
from extender.scheduling.requirements import Requirements
from extender.scheduling.topology import HostConstraints, Terms, pin_zones

__all__ = ["SORT_KEYS", "ExistingNode", "Plan", "PlannedNode", "Unschedulable", "solve"]

SORT_KEYS = ("cpu", "memory", "euclidean")


def _dims(pods: Sequence[Pod], daemonsets: Sequence[Pod]) -> tuple[str, ...]:
    extended = {name for pod in (*pods, *daemonsets) for name in pod.requests.names()} - {CPU, MEMORY, PODS}
    return (CPU, MEMORY, PODS, *sorted(extended))


def _shape_key(pod: Pod) -> tuple:
    """Everything resolution and topology depend on; pods with equal keys are interchangeable."""
    return (
        pod.namespace,
        tuple(sorted(pod.labels.items())),
        tuple(sorted(pod.requests.amounts.items())),
        tuple(sorted(pod.node_selector.items())),
        pod.required_terms,
        pod.preferred_terms,
        pod.tolerations,
        pod.topology_spread,
        pod.pod_affinity,
        pod.pod_anti_affinity,
    )


class _Resolver:
    """Pod shape -> (Provisioner view, requirements) with the reason when there is none."""

    def __init__(self, views: Sequence[ProvisionerView], cache: CandidateCache, dims: Sequence[str]) -> None:
        self.views = views
        self.cache = cache
        self.dims = dims
        self.notes: list[str] = []

    def holds(self, view: ProvisionerView, reqs: Requirements, request: Vector, gpus: frozenset[str]) -> bool:
        return any(fits(request, c.entry.alloc) for c in self.cache.lookup(view, reqs, gpus).candidates)

    def resolve(
        self, pod: Pod, request: Vector, zone: str | None
    ) -> tuple[ProvisionerView | None, Requirements, Requirements | None, str]:
        gpus = gpu_kinds(pod.requests)
        pin = Requirements.from_labels({wk.ZONE: zone}) if zone else Requirements()
        wanted = pod.node_selector.get(wk.PROVISIONER_NAME)
        views = [v for v in self.views if not wanted or v.provisioner.name == wanted]
        reasons: list[str] = []
        terms = [t.intersect(pin) for t in pod_terms(pod)]
        prefs = preferences(pod)
        for view in views:
            if taint := pod.tolerates(view.provisioner.taints):
                reasons.append(
                    f"provisioner/{view.provisioner.name}: did not tolerate {describe_taint(taint)}"
                )
                continue
            for term in terms:
                base = view.requirements.intersect(term)
                if conflict := base.conflict(view.keys):
                    reasons.append(f"provisioner/{view.provisioner.name}: {conflict}")
                    continue
                for kept in range(len(prefs), -1, -1):
                    reqs = base
                    for _, pref, _raw in prefs[:kept]:
                        reqs = reqs.intersect(pref)
                    if reqs.conflict(view.keys) is None and self.holds(view, reqs, request, gpus):
                        if kept < len(prefs):
                            dropped = "; ".join(
                                f"weight {w}: "
                                + ", ".join(f"{r.key} {r.operator} {list(r.values)}" for r in raw)
                                for w, _, raw in prefs[kept:]
                            )
                            self.notes.append(
                                f"Relaxed preferred node affinity of pod {pod.key}, removing: {dropped}"
                            )
                        return view, term, reqs, ""
                reasons.append(
                    f"provisioner/{view.provisioner.name}: no instance type satisfies"
                    f" {base.describe() or 'the'}"
                    f" requirements and holds {_describe_requests(pod.requests)}"
                )
        if wanted and not views:
            reasons.append(f"provisioner {wanted} not found")
        return None, terms[0], None, "; ".join(dict.fromkeys(reasons)) or "no provisioner"

    def eligible_zones(self, pod: Pod) -> list[str]:
        view, _, reqs, _ = self.resolve(pod, vector(pod.requests + Resources({PODS: 1}), self.dims), None)
        if view is None or reqs is None:
            return []
        request = vector(pod.requests + Resources({PODS: 1}), self.dims)
        zones = set()
        for candidate in self.cache.lookup(view, reqs, gpu_kinds(pod.requests)).candidates:
            if fits(request, candidate.entry.alloc):
                zones.update(
                    o.zone
                    for o in candidate.entry.type.offerings
                    if reqs.allows(wk.ZONE, o.zone) and o.available
                )
        return sorted(zones)


def _describe_requests(requests: Resources) -> str:
    return "{" + ", ".join(f"{k}: {v:g}" for k, v in sorted(requests.amounts.items())) + "}"


def _sort_key(name: str, classes: Sequence[PodClass]) -> object:
    if name == "memory":
        return lambda c: (-c.request[1], -c.request[0])
    if name == "euclidean":
        top_cpu = max((c.request[0] for c in classes), default=1) or 1
        top_mem = max((c.request[1] for c in classes), default=1) or 1
        return lambda c: -math.hypot(c.request[0] / top_cpu, c.request[1] / top_mem)
    if name == "cpu":
        return lambda c: (-c.request[0], -c.request[1])
    raise ValueError(f"unknown sort key {name!r}, expected one of {SORT_KEYS}")


def solve(
    pods: Sequence[Pod],
    provisioners: Sequence[Provisioner],
    instance_types: Sequence[InstanceType],
    *,
    daemonsets: Sequence[Pod] = (),
    existing_nodes: Sequence[ExistingNode] = (),
    unavailable: Collection[OfferingKey] = frozenset(),
    usage: Mapping[str, Resources] | None = None,
    sort_key: str = "cpu",
    max_options: int = 60,
    with_bound: bool = True,
) -> Plan:
    """Pack `pods`; `with_bound=False` skips the cost lower bound (most of a small batch's solve time),
    which only reports how far the plan may be from optimal."""
    dims = _dims(pods, daemonsets)
    views = [ProvisionerView.build(p, instance_types, daemonsets, dims) for p in ordered(provisioners)]
    cache = CandidateCache(unavailable)
    resolver = _Resolver(views, cache, dims)
    notes: list[str] = []
    excluded = sorted({line for view in views for line in view.excluded})
    if excluded:
        notes.append(
            f"Excluded {len(excluded)} instance type(s): "
            + "; ".join(excluded[:5])
            + (" ..." if len(excluded) > 5 else "")
        )
    unschedulable: list[Unschedulable] = []

    candidates: list[Pod] = []
    for pod in pods:
        if pod.is_daemonset:
            unschedulable.append(
                Unschedulable(pod, "owned by a DaemonSet; its nodes are provisioned by others")
            )
        else:
            candidates.append(pod)

    needs_zone = [
        p
        for p in candidates
        if any(t.topology_key == wk.ZONE for t in (*p.topology_spread, *p.pod_affinity, *p.pod_anti_affinity))
    ]
    zone_memo: dict[tuple, list[str]] = {}

    def eligible(pod: Pod) -> list[str]:
        # Zones depend on requests and node constraints only, not on labels or pod topology.
        key = (
            tuple(sorted(pod.requests.amounts.items())),
            tuple(sorted(pod.node_selector.items())),
            pod.required_terms,
            pod.preferred_terms,
            pod.tolerations,
        )
        if key not in zone_memo:
            zone_memo[key] = resolver.eligible_zones(pod)
        return zone_memo[key]

    pins, failed = pin_zones(needs_zone, eligible)
    for pod in candidates:
        if pod.key in failed:
            unschedulable.append(Unschedulable(pod, failed[pod.key]))

    live = [pod for pod in candidates if pod.key not in failed]
    terms = Terms()
    hosts: dict[tuple, HostConstraints] = {}
    for pod in live:
        if (key := _shape_key(pod)) not in hosts:
            hosts[key] = HostConstraints.of(pod, terms)
    # Labels only matter through the hostname terms they match: key classes by those, not by labels.
    matched: dict[tuple, tuple[int, ...]] = {}
    classes: dict[tuple, PodClass] = {}
    for pod in live:
        shape = _shape_key(pod)
        label_key = (pod.namespace, shape[1])
        if label_key not in matched:
            matched[label_key] = terms.matching(pod)
        key = (shape[0], *shape[2:], matched[label_key], pins.get(pod.key))
        if key in classes:
            classes[key].pods.append(pod)
            continue
        request = vector(pod.requests + Resources({PODS: 1}), dims)
        view, term, reqs, reason = resolver.resolve(pod, request, pins.get(pod.key))
        classes[key] = PodClass(
            pods=[pod],
            request=request,
            gpus=gpu_kinds(pod.requests),
            host=hosts[shape],
            matches=matched[label_key],
            pod_reqs=term,
            view=view,
            reqs=reqs,
            reason=reason,
        )
    notes.extend(dict.fromkeys(resolver.notes))

    ordered_classes = sorted(classes.values(), key=_sort_key(sort_key, list(classes.values())))
    # Pods whose hostname affinity points at other pods go last, so the pods they follow are placed first.
    ordered_classes.sort(key=lambda c: any(t not in c.matches for t in c.host.affinity))
    min_request = tuple(min((c.request[i] for c in ordered_classes), default=0.0) for i in range(len(dims)))
    packer = Packer(cache, min_request)
    for node in existing_nodes:
        packer.add_existing(node, dims)
    if packer.existing:
        for pod_class in ordered_classes:
            packer.fill_existing(pod_class)
    packer.pack(ordered_classes, lambda pod, reason: unschedulable.append(Unschedulable(pod, reason)))
    packer.merge_neighbours(lambda node: _price(node, cache))

    planned = _apply_limits(
        _materialize(packer.nodes, cache, max_options, dims), views, usage or {}, unschedulable
    )
    existing = {n.existing.name: tuple(n.pods) for n in packer.existing if n.pods and n.existing}
    placed_new = {pod.key for node in planned for pod in node.pods}
    bound = _lower_bound(placed_new, ordered_classes, cache) if with_bound else 0.0
    return Plan(
        nodes=tuple(planned),
        existing=existing,
        unschedulable=tuple(unschedulable),
        total_price=sum(n.price for n in planned),
        lower_bound=bound,
        notes=tuple(notes),
    )


def _fitting(node: Node, cache: CandidateCache, limit: int) -> list[Candidate]:
    """The node's candidates that hold its pods, cheapest first, at most `limit`."""
    assert node.view is not None and node.reqs is not None
    result = []
    for candidate in cache.lookup(node.view, node.reqs, node.gpus).candidates:
        if fits(node.used, candidate.entry.alloc):
            result.append(candidate)
            if len(result) == limit:
                break
    return result


def _price(node: Node, cache: CandidateCache) -> float | None:
    cheapest = _fitting(node, cache, 1)
    return cheapest[0].offering.price if cheapest else None


def _materialize(
    nodes: Sequence[Node], cache: CandidateCache, max_options: int, dims: Sequence[str]
) -> list[PlannedNode]:
    result = []
    for node in nodes:
        assert node.view is not None and node.reqs is not None
        options = _fitting(node, cache, max_options)
        cheapest = options[0]
        offered = [o for c in options for o in c.entry.type.offerings if o.available]
        zones = sorted({o.zone for o in offered if node.reqs.allows(wk.ZONE, o.zone)})
        capacity_types = sorted(
            {o.capacity_type for o in offered if node.reqs.allows(wk.CAPACITY_TYPE, o.capacity_type)}
        )
        provisioner = node.view.provisioner
        labels = {**provisioner.labels, wk.PROVISIONER_NAME: provisioner.name, **node.reqs.single_values()}
        result.append(
            PlannedNode(
                provisioner=provisioner.name,
                options=tuple(c.entry.type for c in options),
                zones=tuple(zones),
                capacity_types=tuple(capacity_types),
                zone=cheapest.offering.zone,
                capacity_type=cheapest.offering.capacity_type,
                price=cheapest.offering.price,
                pods=tuple(node.pods),
                labels=labels,
                taints=tuple(provisioner.taints),
                requests=Resources(dict(zip(dims, node.used, strict=True))),
            )
        )
    return result


def _apply_limits(
    nodes: list[PlannedNode],
    views: Sequence[ProvisionerView],
    usage: Mapping[str, Resources],
    unschedulable: list[Unschedulable],
) -> list[PlannedNode]:
    """Keep nodes in order while the Provisioner's cpu/memory limits allow the cheapest option that fits."""
    limits = {v.provisioner.name: v.provisioner.limits for v in views}
    used = {name: usage.get(name, Resources()) for name in limits}
    kept = []
    for node in nodes:
        limit = limits[node.provisioner]
        names = [n for n in (CPU, MEMORY) if limit.get(n) > 0]
        if not names:
            kept.append(node)
            continue
        room = [
            t
            for t in node.options
            if all(used[node.provisioner].get(n) + t.capacity.get(n) <= limit.get(n) + 1e-9 for n in names)
        ]
        if not room:
            reason = f"provisioner {node.provisioner} limits exceeded: " + ", ".join(
                f"{n} usage {used[node.provisioner].get(n):g} + node {node.options[0].capacity.get(n):g}"
                f" > limit {limit.get(n):g}"
                for n in names
            )
            unschedulable.extend(Unschedulable(pod, reason) for pod in node.pods)
            continue
        if room[0] is not node.options[0]:
            cheapest = min(
                (
                    o
                    for o in room[0].offerings
                    if o.available and o.zone in node.zones and o.capacity_type in node.capacity_types
                ),
                key=lambda o: o.price,
            )
            node = PlannedNode(
                **{
                    **node.__dict__,
                    "options": tuple(room),
                    "zone": cheapest.zone,
                    "capacity_type": cheapest.capacity_type,
                    "price": cheapest.price,
                }
            )
        used[node.provisioner] = used[node.provisioner] + Resources(
            {n: node.options[0].capacity.get(n) for n in (CPU, MEMORY)}
        )
        kept.append(node)
    return kept


def _lower_bound(placed: Collection[str], classes: Sequence[PodClass], cache: CandidateCache) -> float:
    """The largest of three valid bounds (lowerbound.py) on the new nodes' $/h for the pods placed on them.

    A type's capacity is the largest allocatable any Provisioner gives it and its price the
    cheapest offering any of its pods' requirement sets allow, so every real node is within the
    relaxation. Shapes are pooled by request vector (allowing the union of their types), which
    only loosens the bound, so the knapsacks stay few.

    Hostname anti-affinity: the pods that carry a term and match its selector may not share a
    node (`Packer.topology_cap` refuses a second one, as the kube-scheduler would). In the
    whole-pod bound each such pod requests 1 of an exclusivity dimension of which every type
    supplies 1; and the plan needs at least as many nodes as the largest such group has pods,
    which `node_count_bound` charges. Pods that only carry or only match a term are left
    unconstrained, which loosens the bounds but keeps them valid.
    """
    groups = sorted({t for c in classes for t in c.host.anti if t in c.matches})
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
            1.0 if g in pod_class.host.anti and g in pod_class.matches else 0.0 for g in groups
        )
        total, names, rate = pooled.get(request, (0, set(), math.inf))
        names.update(found.names)
        rate = min(rate, cache.pod_rate(found, pod_class.request))
        pooled[request] = (total + count, names, rate)
        if id(found) in seen:
            continue
        seen.add(id(found))
        for c in found.candidates:
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
    return max(
        cover if math.isfinite(cover) else 0.0,
        lowerbound.pattern_bound(shapes, supplies),
        lowerbound.node_count_bound(demand[:2], nodes, [(c[:2], p) for c, p in resources]) if nodes else 0.0,
    )
