"""solve(): pending pods + Provisioners + catalog -> Plan. Pure: no API calls, no clock, no globals.

Steps: resolve each distinct pod shape to a Provisioner and a requirement set (required terms in
order, preferred terms relaxed lightest-first), pin zone-constrained pods to zones, pack classes of
identical pods First-Fit-Descending (existing nodes first), apply Provisioner limits, then give
every new node its options (cheapest first) and price, and bound the cost from below.
Called by the provisioning worker and `karpy plan`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from extender.api import labels as wk
from extender.api.affinity import HONOR, TopologySpread
from extender.api.pod import Pod
from extender.api.provisioner import Provisioner
from extender.api.resources import CPU, MEMORY, PODS, Resources
from extender.scheduling import improve, lowerbound, rounding
from extender.scheduling.candidates import (
    Candidate,
    CandidateCache,
    ProvisionerView,
    Vector,
    fit_count,
    fits,
    gpu_kinds,
)
from extender.scheduling.domains import DomainPlanner
from extender.scheduling.instancetypes import InstanceType, OfferingKey
from extender.scheduling.packer import (
    LIMITS,
    MIX_TRIALS,
    UNMET_TOPOLOGY,
    Match,
    Node,
    Packer,
    PodClass,
    State,
    alignment,
    overlap,
)
from extender.scheduling.plan import ExistingNode, Plan, PlannedNode, Unschedulable
from extender.scheduling.provisioners import ordered
from extender.scheduling.requirements import Requirements
from extender.scheduling.resolver import Resolver
from extender.scheduling.topology import HostConstraints, NamespaceLabels, Terms, needs_namespace_labels

__all__ = ["SORT_KEYS", "ExistingNode", "Plan", "PlannedNode", "Unschedulable", "solve"]

SORT_KEYS = ("cpu", "memory", "euclidean")


def _dims(pods: Sequence[Pod], daemonsets: Sequence[Pod]) -> tuple[str, ...]:
    extended = {name for pod in (*pods, *daemonsets) for name in pod.requests.names()} - {CPU, MEMORY, PODS}
    return (CPU, MEMORY, PODS, *sorted(extended))


def _shape_key(pod: Pod) -> tuple[Hashable, ...]:
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
        pod.preferred_pod_affinity,
        pod.preferred_pod_anti_affinity,
        pod.host_ports,
        pod.volume_terms,
    )


def _sort_key(name: str, classes: Sequence[PodClass]) -> Callable[[PodClass], Any]:
    if name == "memory":
        return lambda c: (-c.request[1], -c.request[0])
    if name == "euclidean":
        top_cpu = max((c.request[0] for c in classes), default=1) or 1
        top_mem = max((c.request[1] for c in classes), default=1) or 1
        return lambda c: -math.hypot(c.request[0] / top_cpu, c.request[1] / top_mem)
    if name == "cpu":
        return lambda c: (-c.request[0], -c.request[1])
    raise ValueError(f"unknown sort key {name!r}, expected one of {SORT_KEYS}")


def _ordering(name: str) -> improve.Order:
    def order(classes: Sequence[PodClass]) -> list[PodClass]:
        return sorted(classes, key=_sort_key(name, classes))

    return order


def _unmodelled(pod: Pod, namespaces: NamespaceLabels | None) -> str:
    if pod.unmodelled:
        return "; ".join(pod.unmodelled)
    if namespaces is None and needs_namespace_labels(pod):
        return "pod (anti-)affinity namespaceSelector needs the cluster's namespace labels"
    return ""


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
    namespaces: NamespaceLabels | None = None,
    search_budget: int | None = None,
) -> Plan:
    """Pack `pods`; `with_bound=False` skips the cost lower bound (most of a small batch's solve time),
    which only reports how far the plan may be from optimal.

    `existing_nodes` are every node of the cluster with its pods (topology counts them; karpy packs
    onto the schedulable ones); `namespaces` maps namespace -> labels for namespaceSelector terms.
    A pod is solved in rounds: a pod dropped by a Provisioner's limits is tried on the next
    Provisioner, and a pod that cannot be placed is taken out so the topology of the others is
    recounted without it.

    `search_budget`: repacks the local search (improve.py) may try after the greedy packing; None =
    a budget that grows with the number of new nodes (`improve.default_budget`), 0 = none, and no
    balanced greedy passes either (the first-fit plan alone). A count, not a time: the solver
    reads no clock.
    """
    dims = _dims(pods, daemonsets)
    views = [ProvisionerView.build(p, instance_types, daemonsets, dims) for p in ordered(provisioners)]
    notes: list[str] = []
    excluded = sorted({line for view in views for line in view.excluded})
    if excluded:
        notes.append(
            f"Excluded {len(excluded)} instance type(s): "
            + "; ".join(excluded[:5])
            + (" ..." if len(excluded) > 5 else "")
        )
    final: list[Unschedulable] = []
    live: list[Pod] = []
    for pod in pods:
        if pod.is_daemonset:
            final.append(Unschedulable(pod, "owned by a DaemonSet; its nodes are provisioned by others"))
        elif reason := _unmodelled(pod, namespaces):
            final.append(Unschedulable(pod, f"karpy does not model {reason}", unmodelled=True))
        else:
            live.append(pod)
    context = _Context(views, CandidateCache(unavailable), dims, existing_nodes, namespaces, usage or {})
    context.search_budget = search_budget
    skip: dict[str, set[str]] = {}
    avoid: dict[str, Requirements] = {}
    #: pod key -> the limits reason of the first Provisioner that dropped it.
    limited: dict[str, str] = {}
    for attempt in range(MAX_ROUNDS):
        result = context.round(live, skip, avoid, sort_key, max_options)
        dropped = {u.pod.key: u for u in result.unschedulable}
        if not dropped:
            break
        retry = {
            key
            for key, u in dropped.items()
            if LIMITS in u.reason and (u.provisioner or "") and not _only(u.pod, u.provisioner, views, skip)
        }
        for key in retry:
            skip.setdefault(key, set()).add(dropped[key].provisioner or "")
            limited.setdefault(key, dropped[key].reason)
        # A pod pinned to a domain only existing nodes offer, which had no room: try another domain.
        for key in set(dropped) - retry:
            if (only := result.existing_only.get(key)) is not None:
                avoid[key] = avoid.get(key, Requirements()).intersect(only)
                retry.add(key)
        # Others' placements counted on a pod that failed later: plan again without it.
        if not retry and not (result.topology and any(not u.uncounted for u in dropped.values())):
            break
        # Pods that failed for want of a domain are tried again while others change (they may
        # have been crowded out by pods now gone); once nothing else changes they are final, and
        # one more round recounts the topology of the rest without them.
        gone = {key for key, u in dropped.items() if key not in retry and not u.topology}
        if attempt == MAX_ROUNDS - 1 or (not retry and not gone):
            gone = set(dropped)
        final.extend(dropped[key].result_after(limited) for key in gone)
        live = [p for p in live if p.key not in gone]
        if attempt == MAX_ROUNDS - 1:
            # Out of rounds: plan what never failed, so no placement counts on a dropped pod.
            result = context.round(live, skip, avoid, sort_key, max_options)
    final.extend(u.result_after(limited) for u in result.unschedulable)
    planned, classes = result.nodes, result.classes
    placed_new = {pod.key for node in planned for pod in node.pods}
    bound = _lower_bound(placed_new, classes, context.cache) if with_bound else 0.0
    return Plan(
        nodes=tuple(planned),
        existing=result.existing,
        unschedulable=tuple(final),
        total_price=sum(n.price for n in planned),
        lower_bound=bound,
        notes=tuple(dict.fromkeys([*notes, *result.notes])),
    )


MAX_ROUNDS = 6


def _follow_depth(classes: Sequence[PodClass]) -> dict[int, int]:
    """0 for a class that follows no other class by hostname affinity, else 1 + its leader's depth."""
    by_term: dict[int, list[PodClass]] = {}
    for c in classes:
        for term in c.matches:
            by_term.setdefault(term, []).append(c)
    leaders = {
        id(c): [d for t in c.host.affinity if t not in c.matches for d in by_term.get(t, ()) if d is not c]
        for c in classes
        if c.host.affinity
    }
    depth: dict[int, int] = {}

    def visit(c: PodClass, path: frozenset[int]) -> int:
        if id(c) not in depth:
            ahead = [visit(d, path | {id(c)}) for d in leaders.get(id(c), ()) if id(d) not in path]
            depth[id(c)] = 1 + max(ahead) if ahead else (1 if leaders.get(id(c)) else 0)
        return depth[id(c)]

    for c in classes:
        visit(c, frozenset())
    return depth


def _only(
    pod: Pod, provisioner: str | None, views: Sequence[ProvisionerView], skip: Mapping[str, set[str]]
) -> bool:
    """Whether no other Provisioner is left to try for the pod."""
    if pod.node_selector.get(wk.PROVISIONER_NAME):
        return True
    tried = skip.get(pod.key, set()) | {provisioner or ""}
    return all(v.provisioner.name in tried for v in views)


@dataclass
class _Dropped:
    pod: Pod
    reason: str
    provisioner: str | None = None
    #: Failed on other pods' placement (a topology rule, host ports), not on capacity.
    topology: bool = False
    #: Failed before it was given domains, so no other pod's placement counted on it.
    uncounted: bool = False

    def result_after(self, limited: Mapping[str, str]) -> Unschedulable:
        """The reason, led by the limits that sent the pod to other Provisioners, if any did."""
        first = limited.get(self.pod.key)
        reason = self.reason if not first or first == self.reason else f"{first}; then {self.reason}"
        return Unschedulable(self.pod, reason)


@dataclass
class _Round:
    nodes: list[PlannedNode]
    existing: dict[str, tuple[Pod, ...]]
    unschedulable: list[_Dropped]
    classes: list[PodClass]
    notes: list[str]
    #: Whether any pod's placement depended on others' (topology rules or host ports).
    topology: bool
    existing_only: Mapping[str, Requirements]


class _Context:
    """What every round shares: views, the candidate cache, the cluster and the limits."""

    def __init__(
        self,
        views: Sequence[ProvisionerView],
        cache: CandidateCache,
        dims: Sequence[str],
        existing: Sequence[ExistingNode],
        namespaces: NamespaceLabels | None,
        usage: Mapping[str, Resources],
    ) -> None:
        self.views, self.cache, self.dims = views, cache, dims
        self.existing, self.namespaces, self.usage = existing, namespaces, usage
        #: Local-search repacks per round; None = improve.default_budget.
        self.search_budget: int | None = None

    def round(
        self,
        pods: Sequence[Pod],
        skip: Mapping[str, set[str]],
        avoid: Mapping[str, Requirements],
        sort_key: str,
        max_options: int,
    ) -> _Round:
        resolver = Resolver(self.views, self.cache, self.dims)
        dropped: list[_Dropped] = []

        def reachable(pod: Pod, key: str, extra: Requirements) -> frozenset[str]:
            return resolver.domains(pod, key, extra, fit=True, excluded=skip.get(pod.key, ()))

        def possible(pod: Pod, key: str, spread: TopologySpread) -> frozenset[str]:
            return resolver.domains(
                pod,
                key,
                Requirements(),
                fit=False,
                honor_affinity=spread.node_affinity_policy == HONOR,
                honor_taints=spread.node_taints_policy == HONOR,
            )

        def may_share(counted: Pod, pod: Pod, spread: TopologySpread) -> bool:
            return resolver.may_share(
                counted,
                pod,
                honor_affinity=spread.node_affinity_policy == HONOR,
                honor_taints=spread.node_taints_policy == HONOR,
            )

        planner = DomainPlanner(self.existing, self.namespaces, reachable, possible, avoid, may_share)
        order = {
            pod.key: i
            for i, pod in enumerate(sorted(pods, key=lambda p: (-p.requests.cpu, -p.requests.memory)))
        }
        outcome = planner.plan(pods, lambda p: order[p.key])
        live = []
        for pod in pods:
            if pod.key in outcome.failed:
                dropped.append(_Dropped(pod, outcome.failed[pod.key], topology=True, uncounted=True))
            else:
                live.append(pod)
        terms = Terms()
        # Existing pods' required hostname anti-affinity first, so batch pods see what repels them.
        repels: dict[str, tuple[int, ...]] = {}
        for node in self.existing:
            # A pod without inter-pod rules or a spread has no hostname term (most running pods).
            for pod in (p for p in node.pods if p.pod_anti_affinity or p.pod_affinity or p.topology_spread):
                repels[pod.key] = HostConstraints.of(pod, terms, self.namespaces, soft=False).repels
        hosts: dict[Hashable, tuple[HostConstraints, HostConstraints]] = {}
        for pod in live:
            if (key := _shape_key(pod)) not in hosts:
                hosts[key] = (
                    HostConstraints.of(pod, terms, self.namespaces),
                    HostConstraints.of(pod, terms, self.namespaces, soft=False),
                )
        matched: dict[Hashable, tuple[int, ...]] = {}
        # Running pods of one owner share one labels object (the bound-pod index interns them):
        # by identity first, which also keeps each labels object alive while its id is a key.
        same_labels: dict[tuple[str, int], tuple[Mapping[str, str], tuple[int, ...]]] = {}

        def matching(pod: Pod) -> tuple[int, ...]:
            if (known := same_labels.get((pod.namespace, id(pod.labels)))) is not None:
                return known[1]
            label_key = (pod.namespace, tuple(sorted(pod.labels.items())))
            if label_key not in matched:
                matched[label_key] = terms.matching(pod)
            same_labels[(pod.namespace, id(pod.labels))] = (pod.labels, matched[label_key])
            return matched[label_key]

        classes: dict[Hashable, PodClass] = {}
        for pod in live:
            shape = _shape_key(pod)
            extra = outcome.requirements.get(pod.key, Requirements())
            excluded = frozenset(skip.get(pod.key, ()))
            key = (shape[0], *shape[2:], matching(pod), extra, excluded)
            if key in classes:
                classes[key].pods.append(pod)
                continue
            view, term, reqs, reason = resolver.resolve(pod, extra, excluded)
            classes[key] = PodClass(
                pods=[pod],
                request=resolver.request(pod),
                gpus=gpu_kinds(pod.requests),
                host=hosts[shape][0],
                hard_host=hosts[shape][1],
                matches=matching(pod),
                pod_reqs=term,
                view=view,
                reqs=reqs,
                reason=reason,
                ports=pod.host_ports,
            )
        ordered_classes = sorted(classes.values(), key=_sort_key(sort_key, list(classes.values())))
        # Pods whose hostname affinity points at other pods go after the pods they follow.
        depth = _follow_depth(ordered_classes)
        ordered_classes.sort(key=lambda c: depth[id(c)])
        min_request = tuple(
            min((c.request[i] for c in ordered_classes), default=0.0) for i in range(len(self.dims))
        )
        packer = Packer(self.cache, min_request, self._headroom())
        for node in self.existing:
            # Without a hostname term in play no running pod counts for one: skip the pods.
            packer.add_existing(
                node, self.dims, matching, lambda p: repels.get(p.key, ()), count_pods=bool(terms.ids)
            )
        if packer.existing:
            for pod_class in ordered_classes:
                packer.fill_existing(pod_class)

        view_of = {p.key: c.view.provisioner.name for c in ordered_classes if c.view for p in c.pods}

        def unplaced(pod: Pod, reason: str) -> None:
            dropped.append(_Dropped(pod, reason, view_of.get(pod.key), topology=reason == UNMET_TOPOLOGY))

        fitting = _Fitting(self.cache)

        def cheapest(node: Node) -> Candidate | None:
            return next(iter(fitting(node, 1)), None)

        # Greedy passes, first-fit trials alone and with balanced ones by each match, each merged
        # and searched; the best plan is kept, so the balanced trials never make a plan dearer.
        start = packer.state(ordered_classes)
        passes: list[tuple[State, list[tuple[Pod, str]]]] = []
        variants: list[tuple[Match | None, int, rounding.Start]] = [(None, 0, [])]
        if self.search_budget != 0 and _mixes(ordered_classes):
            variants += [(m, n, []) for n in (MIX_TRIALS, 2 * MIX_TRIALS) for m in (alignment, overlap)]
        if self.search_budget != 0:
            # First-fit after the configuration LP's rounded plan (the greedy places the residual).
            opened = rounding.starts(self.cache, ordered_classes, list(packer.headroom))
            variants += [(None, 0, nodes) for nodes in opened]
        for match, mix_trials, nodes in variants:
            packer.restore(start)
            left_out: list[tuple[Pod, str]] = []
            rounding.open_start(packer, nodes)
            packer.pack(ordered_classes, _collect(left_out), match=match, mix_trials=mix_trials)
            packer.merge_neighbours(cheapest)
            budget = self.search_budget
            if budget is None:
                budget = improve.default_budget(len(packer.nodes))
            if budget:
                orders = [_ordering(name) for name in SORT_KEYS]
                improve.improve(packer, orders, cheapest, budget)
            passes.append((packer.state(ordered_classes), left_out))
        chosen = passes[0]
        for other in passes[1:]:
            if _better(other[0].nodes, len(other[1]), chosen[0].nodes, len(chosen[1]), cheapest):
                chosen = other
        packer.restore(chosen[0])
        for pod, reason in chosen[1]:
            unplaced(pod, reason)
        limited: list[Unschedulable] = []
        planned = _apply_limits(
            _materialize(packer.nodes, fitting, max_options, self.dims), self.views, self.usage, limited
        )
        for item in limited:
            dropped.append(_Dropped(item.pod, item.reason, view_of.get(item.pod.key)))
        existing = {n.existing.name: tuple(n.pods) for n in packer.existing if n.pods and n.existing}
        topology = bool(outcome.requirements) or any(
            c.host.anti or c.host.affinity or c.host.spread or c.host.repels or c.ports
            for c in ordered_classes
        )
        return _Round(
            nodes=planned,
            existing=existing,
            unschedulable=dropped,
            classes=ordered_classes,
            notes=[*resolver.notes, *outcome.notes, *packer.relaxed],
            topology=topology,
            existing_only=outcome.existing_only,
        )

    def _headroom(self) -> dict[str, Resources]:
        result = {}
        for view in self.views:
            limits = view.provisioner.limits
            names = view.provisioner.limit_names((CPU, MEMORY))
            if names:
                used = self.usage.get(view.provisioner.name, Resources())
                result[view.provisioner.name] = Resources({n: limits.get(n) - used.get(n) for n in names})
        return result


class _Fitting:
    """`_fitting`, memoised per round: nodes of one pattern (the packer repeats them) ask the same.
    Keyed by identity of the view and requirements, which the round's nodes keep alive."""

    def __init__(self, cache: CandidateCache) -> None:
        self.cache = cache
        self._memo: dict[tuple[int, int, frozenset[str], Vector, int], list[Candidate]] = {}

    def __call__(self, node: Node, limit: int) -> list[Candidate]:
        key = (id(node.view), id(node.reqs), node.gpus, node.used, limit)
        if (found := self._memo.get(key)) is None:
            found = self._memo[key] = _fitting(node, self.cache, limit)
        return found


def _collect(out: list[tuple[Pod, str]]) -> Callable[[Pod, str], None]:
    return lambda pod, reason: out.append((pod, reason))


#: Balanced passes run while pods left for new nodes x classes is at most this: a balanced fill
#: looks at every class every few pods, so its work grows with both, where first-fit's grows with
#: the pods. Past it (5,000 pods of 20 shapes; 1,000 pods of hundreds of topology classes) the
#: first-fit pass alone keeps the batch fast; large batches of many shapes fill first-fit nodes
#: well anyway (5,000 pods of 20 shapes: no balanced pass was cheaper).
MIX_WORK = 40_000
#: Nor with more classes than this (a balanced fill rescans them all every few pods): batches of
#: many distinct pods (hundreds of label and topology variants) keep first-fit's speed.
MIX_CLASSES = 24


def _mixes(classes: Sequence[PodClass]) -> bool:
    """Whether balanced passes are worth running: two classes with pods left could share a new
    node (else they add nothing), within MIX_CLASSES and MIX_WORK."""
    pending = [c for c in classes if c.left and c.view is not None]
    if len(pending) > MIX_CLASSES or sum(c.left for c in pending) * len(pending) > MIX_WORK:
        return False
    return any(a.view is b.view and a.gpus == b.gpus for a, b in itertools.pairwise(pending))


def _better(
    nodes: Sequence[Node],
    left_out: int,
    other: Sequence[Node],
    other_left_out: int,
    price: Callable[[Node], Candidate | None],
) -> bool:
    """Whether `nodes` beat `other`: fewer pods left out, else cheaper, with more nodes only when
    that saves a real share of the cost (improve.pays_for_its_nodes, as the local search's repacks)."""
    if left_out != other_left_out:
        return left_out < other_left_out
    before = sum(_price(price(n)) for n in other)
    saving = before - sum(_price(price(n)) for n in nodes)
    return saving > 1e-9 and improve.pays_for_its_nodes(len(nodes) - len(other), saving, before)


def _price(candidate: Candidate | None) -> float:
    return candidate.offering.price if candidate else 0.0


def _fitting(node: Node, cache: CandidateCache, limit: int) -> list[Candidate]:
    """The node's candidates that hold its pods, cheapest first, at most `limit`."""
    assert node.view is not None and node.reqs is not None
    result = []
    cpu, memory = node.used[0] - 1e-9, node.used[1] - 1e-9
    for candidate in cache.lookup(node.view, node.reqs, node.gpus).candidates:
        alloc = candidate.entry.alloc
        # cpu and memory first: they rule out most types without the general check.
        if alloc[0] >= cpu and alloc[1] >= memory and fits(node.used, alloc):
            result.append(candidate)
            if len(result) == limit:
                break
    return result


def _materialize(
    nodes: Sequence[Node], fitting: _Fitting, max_options: int, dims: Sequence[str]
) -> list[PlannedNode]:
    result = []
    # Zones and capacity types per (requirements, options): the same for every node of a pattern.
    offers: dict[tuple[int, int], tuple[list[str], list[str]]] = {}
    for node in nodes:
        assert node.view is not None and node.reqs is not None
        options = fitting(node, max_options)
        cheapest = options[0]
        if (found := offers.get((id(node.reqs), id(options)))) is None:
            offered = [o for c in options for o in c.entry.type.offerings if o.available]
            found = offers[(id(node.reqs), id(options))] = (
                sorted({o.zone for o in offered if node.reqs.allows(wk.ZONE, o.zone)}),
                sorted(
                    {o.capacity_type for o in offered if node.reqs.allows(wk.CAPACITY_TYPE, o.capacity_type)}
                ),
            )
        zones, capacity_types = found
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
    provisioners = {v.provisioner.name: v.provisioner for v in views}
    used = {name: usage.get(name, Resources()) for name in provisioners}
    kept = []
    for node in nodes:
        limit = provisioners[node.provisioner].limits
        names = provisioners[node.provisioner].limit_names((CPU, MEMORY))
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
