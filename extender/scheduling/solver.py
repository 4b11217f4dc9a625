"""solve(): pending pods + Provisioners + catalog -> Plan. Pure: no API calls, no clock, and no global
state but memos that never change a plan (views.py keeps each Provisioner's view of the catalog).

A solve is a few rounds (`solve`: a pod dropped by a Provisioner's limits is tried on the next,
pods that cannot be placed are taken out and the rest planned again). A round (`_Context.round`)
is a row of named steps: give topology-constrained pods their domains (domains.py), group the pods
into classes (classes.py), fill existing nodes, run each packing heuristic from that start and
keep the best packing (passes.py), give each new node its options and price (options.py), and
check Provisioner limits (limits.py). Last, the plan's cost is bounded from below.
Called by the provisioning worker and `karpy plan`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial

from extender.api import labels as wk
from extender.api.affinity import HONOR, TopologySpread
from extender.api.pod import Pod
from extender.api.provisioner import Provisioner
from extender.api.resources import CPU, MEMORY, PODS, Resources
from extender.scheduling import attach, lastbind, limits, passes, reservations, shared_claims
from extender.scheduling.bound import plan_bound
from extender.scheduling.candidates import MAX_OPTIONS, CandidateCache, ProvisionerView
from extender.scheduling.causes import Cause
from extender.scheduling.classes import SORT_KEYS, Matcher, build_classes, existing_repels
from extender.scheduling.domains import DomainPlanner, Outcome, settle_phases
from extender.scheduling.fill import PodClass
from extender.scheduling.instancetypes import InstanceType, OfferingKey
from extender.scheduling.options import Fitting, materialize
from extender.scheduling.packer import Packer
from extender.scheduling.plan import ExistingNode, Plan, PlannedNode, Unschedulable
from extender.scheduling.pool_choice import ordered
from extender.scheduling.requirements import Requirements
from extender.scheduling.resolver import Resolver
from extender.scheduling.shape import Shapes
from extender.scheduling.topology import NamespaceLabels, Terms, needs_namespace_labels
from extender.scheduling.views import VIEWS

__all__ = ["SORT_KEYS", "ExistingNode", "Plan", "PlannedNode", "Unschedulable", "dimensions", "solve"]


def dimensions(pods: Sequence[Pod], daemonsets: Sequence[Pod]) -> tuple[str, ...]:
    """The resource dimensions a plan of `pods` counts: cpu, memory, pods, the extended resources
    asked for, and one attach limit per CSI driver in use."""
    extended = {name for pod in (*pods, *daemonsets) for name in pod.requests.names()} - {CPU, MEMORY, PODS}
    drivers = {driver for pod in pods for driver, _ in pod.csi_volumes}
    return (CPU, MEMORY, PODS, *sorted(extended), *(attach.dimension(d) for d in sorted(drivers)))


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
    max_options: int = MAX_OPTIONS,
    with_bound: bool = True,
    namespaces: NamespaceLabels | None = None,
    search_budget: int | None = None,
) -> Plan:
    """Pack `pods`; `with_bound=False` skips the cost lower bound (most of a small batch's solve time),
    which only reports how far the plan may be from optimal; `Plan.bounding()` computes it later.

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
    dims = dimensions(pods, daemonsets)
    # A static NodePool's nodes are launched by its replicas alone (Karpenter's static provisioning
    # controller), never for pods; they still take pods as existing nodes.
    dynamic = [p for p in provisioners if not p.is_static]
    views = [VIEWS.view_of(p, instance_types, daemonsets, dims) for p in ordered(dynamic)]
    notes: list[str] = []
    excluded = sorted({line for view in views for line in view.excluded})
    if excluded:
        notes.append(
            f"Excluded {len(excluded)} instance type(s): "
            + "; ".join(excluded[:5])
            + (" ..." if len(excluded) > 5 else "")
        )
    final, live = _screen(pods, namespaces)
    context = _Context(
        views,
        CandidateCache(unavailable, max_options),
        dims,
        existing_nodes,
        namespaces,
        usage or {},
        search_budget,
    )
    result, dropped, later = _rounds(context, live, sort_key, max_options)
    classes = result.classes
    # The bound covers the rounds' pods (the last binds only fill room already paid for).
    placed_new = {pod.key for node in result.nodes for pod in node.pods}
    bounding = partial(plan_bound, placed_new, classes, context.cache)
    phases = settle_phases(
        [*(p for n in result.nodes for p in n.pods), *(p for ps in result.existing.values() for p in ps)],
        result.phases,
        namespaces,
    )
    last = _last_binds(context, result, later, sort_key, phases, namespaces)
    bound = {p.key for p in last.placed}
    # Nodes past their reservations' counts launch as another capacity type (reservations.py).
    planned, exhausted = reservations.assign(last.nodes, context.cache.unavailable)
    return Plan(
        nodes=tuple(planned),
        existing=last.existing,
        unschedulable=tuple(final + [last.after(u) for u in dropped if u.pod.key not in bound] + exhausted),
        total_price=sum(n.price for n in planned),
        lower_bound=bounding() if with_bound else 0.0,
        notes=tuple(dict.fromkeys([*notes, *result.notes, *last.notes])),
        bind_phases=last.phases,
        bounding=bounding,
    )


MAX_ROUNDS = 6
#: Passes of last binds, each on the plan the one before left: the domain planner checks a node's
#: room for one pod at a time, so of pods given one domain some may find it full.
LAST_BINDS = 3


def _last_binds(
    context: _Context,
    result: _Round,
    pods: Sequence[Pod],
    sort_key: str,
    phases: Mapping[str, int],
    namespaces: NamespaceLabels | None,
) -> _Last:
    """The plan after placing `pods` on its nodes (no new node) to bind after every other pod,
    with the bind phases of all."""
    done = _Last(list(result.nodes), dict(result.existing), phases=dict(phases))
    for _ in range(LAST_BINDS if pods else 0):
        last = context.bind_last(done.nodes, done.existing, pods, sort_key)
        done.failed = last.failed
        if not last.placed:
            break
        # They bind after every pod placed before them, in their own phases among themselves.
        after = max(done.phases.values(), default=0) + 1
        own = settle_phases(last.placed, last.phases, namespaces)
        done.phases = {**done.phases, **{p.key: after + own.get(p.key, 0) for p in last.placed}}
        done.nodes, done.existing = last.nodes, last.existing
        done.placed += last.placed
        done.notes += last.notes
        placed = {p.key for p in last.placed}
        pods = [p for p in pods if p.key not in placed]
    return done


def _screen(pods: Sequence[Pod], namespaces: NamespaceLabels | None) -> tuple[list[Unschedulable], list[Pod]]:
    """Pods karpy never plans (DaemonSet pods, rules it does not model), and the rest."""
    final: list[Unschedulable] = []
    live: list[Pod] = []
    for pod in pods:
        if pod.is_daemonset:
            final.append(Unschedulable(pod, "owned by a DaemonSet; its nodes are provisioned by others"))
        elif reason := _unmodelled(pod, namespaces):
            final.append(Unschedulable(pod, f"karpy does not model {reason}", unmodelled=True))
        else:
            live.append(pod)
    return final, live


def _rounds(
    context: _Context, live: list[Pod], sort_key: str, max_options: int
) -> tuple[_Round, list[Unschedulable], list[Pod]]:
    """Rounds until no pod is left to retry: the last round, the pods dropped before it and those of
    them to try once more on the plan's nodes (left out for limits or hostname rules)."""
    views = context.views
    final: list[Unschedulable] = []
    skip: dict[str, set[str]] = {}
    avoid: dict[str, Requirements] = {}
    #: pod key -> how the first Provisioner whose limits dropped it did.
    limited: dict[str, _Dropped] = {}
    later: list[Pod] = []
    order = {p.key: i for i, p in enumerate(live)}
    for attempt in range(MAX_ROUNDS):
        result = context.round(live, skip, avoid, sort_key, max_options)
        dropped = {u.pod.key: u for u in result.unschedulable}
        if not dropped:
            break
        retry = {
            key
            for key, u in dropped.items()
            if u.cause is Cause.LIMITS and u.provisioner and not _only(u.pod, u.provisioner, views, skip)
        }
        for key in retry:
            skip.setdefault(key, set()).add(dropped[key].provisioner or "")
            limited.setdefault(key, dropped[key])
        # A pod pinned to a domain only existing nodes offer, which had no room: try another domain.
        for key in set(dropped) - retry:
            if (only := result.existing_only.get(key)) is not None:
                avoid[key] = avoid.get(key, Requirements()).intersect(only)
                retry.add(key)
        # Others' placements counted on a pod that failed later: plan again without it.
        if not retry and not (result.topology and any(u.cause is not Cause.DOMAIN for u in dropped.values())):
            break
        # Pods that failed for want of a domain are tried again while others change (they may
        # have been crowded out by pods now gone); once nothing else changes they are final, and
        # one more round recounts the topology of the rest without them.
        gone = {key for key, u in dropped.items() if key not in retry and not u.cause.topology}
        if attempt == MAX_ROUNDS - 1 or (not retry and not gone):
            gone = set(dropped)
        final.extend(dropped[key].result_after(limited) for key in gone)
        later.extend(dropped[key].pod for key in gone if dropped[key].later(limited))
        live = [p for p in live if p.key not in gone]
        if attempt == MAX_ROUNDS - 1:
            # Out of rounds: plan what never failed, so no placement counts on a dropped pod.
            result = context.round(live, skip, avoid, sort_key, max_options)
    final.extend(u.result_after(limited) for u in result.unschedulable)
    later.extend(u.pod for u in result.unschedulable if u.later(limited))
    # In batch order, not the order of the sets they were dropped from.
    later.sort(key=lambda p: order[p.key])
    return result, final, later


def _only(
    pod: Pod, provisioner: str | None, views: Sequence[ProvisionerView], skip: Mapping[str, set[str]]
) -> bool:
    """Whether no other Provisioner is left to try for the pod."""
    if wk.owner_of(pod.node_selector):
        return True
    tried = skip.get(pod.key, set()) | {provisioner or ""}
    return all(v.provisioner.name in tried for v in views)


@dataclass
class _Dropped:
    pod: Pod
    reason: str
    cause: Cause
    provisioner: str | None = None

    def later(self, limited: Mapping[str, _Dropped]) -> bool:
        """Whether its domain was chosen before packing found the domain's new node forbidden by
        limits or refused by its hostname rules: a node elsewhere may still take it."""
        return self.pod.key in limited or self.cause in (Cause.LIMITS, Cause.HOST_RULES)

    def result_after(self, limited: Mapping[str, _Dropped]) -> Unschedulable:
        """The reason, led by the limits that sent the pod to other Provisioners, if any did."""
        first = limited.get(self.pod.key)
        if first is None:
            over = self.provisioner if self.cause is Cause.LIMITS else None
            return Unschedulable(self.pod, self.reason, over_limits=over)
        reason = self.reason if first.reason == self.reason else f"{first.reason}; then {self.reason}"
        return Unschedulable(self.pod, reason, over_limits=first.provisioner)


@dataclass
class _Last:
    """The plan's nodes after the last binds, the pods those placed, their bind phases among
    themselves and notes."""

    nodes: list[PlannedNode]
    existing: dict[str, tuple[Pod, ...]]
    placed: list[Pod] = field(default_factory=list)
    phases: Mapping[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: pod key -> why no domain on those nodes satisfies the pod's rules.
    failed: Mapping[str, str] = field(default_factory=dict)

    def after(self, item: Unschedulable) -> Unschedulable:
        """The pod's reason, followed by why the last binds found it no domain, if they did not."""
        why = self.failed.get(item.pod.key)
        if why is None or item.reason.endswith(why):
            return item
        return replace(item, reason=f"{item.reason}; then {why}")


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
    #: pod key -> bind phase (domains.py), for pods binding after others.
    phases: Mapping[str, int]


class _Context:
    """What every round shares: views, the candidate cache, the cluster, the limits and the shapes."""

    def __init__(
        self,
        views: Sequence[ProvisionerView],
        cache: CandidateCache,
        dims: Sequence[str],
        existing: Sequence[ExistingNode],
        namespaces: NamespaceLabels | None,
        usage: Mapping[str, Resources],
        search_budget: int | None,
    ) -> None:
        self.views, self.cache, self.dims = views, cache, dims
        self.existing, self.namespaces, self.usage = existing, namespaces, usage
        #: Local-search repacks per pass; None = improve.default_budget.
        self.search_budget = search_budget
        self.provisioners = [v.provisioner for v in views]
        self.shapes = Shapes()
        #: Claims charged once per node (shared_claims.py), found in the first round, which has every pod.
        self.shared: frozenset[str] | None = None

    def round(
        self,
        pods: Sequence[Pod],
        skip: Mapping[str, set[str]],
        avoid: Mapping[str, Requirements],
        sort_key: str,
        max_options: int,
    ) -> _Round:
        resolver, outcome, classes, packer = self._start(pods, skip, avoid, sort_key)
        dropped = [_Dropped(p, outcome.failed[p.key], Cause.DOMAIN) for p in pods if p.key in outcome.failed]
        start = packer.state(classes)
        fitting = Fitting(self.cache)
        heuristics = passes.portfolio(
            classes, start.cursors, self.cache, list(packer.headroom), self.search_budget
        )
        if len(heuristics) > 1:
            packer.share_fills()
        packings = passes.run_all(heuristics, packer, start, classes, fitting.cheapest, self.search_budget)
        chosen = passes.choose(packings, fitting.cheapest)
        packer.restore(chosen.state)
        planned, over = limits.apply(
            materialize(packer.nodes, fitting, max_options, self.dims), self.provisioners, self.usage
        )
        view_of = {p.key: c.view.provisioner.name for c in classes if c.view for p in c.pods}
        dropped += [
            _Dropped(pod, reason, cause, view_of.get(pod.key)) for pod, cause, reason in chosen.left_out
        ]
        dropped += [_Dropped(u.pod, u.reason, Cause.LIMITS, view_of.get(u.pod.key)) for u in over]
        return _Round(
            nodes=planned,
            existing={n.existing.name: tuple(n.pods) for n in packer.existing if n.pods and n.existing},
            unschedulable=dropped,
            classes=classes,
            notes=[*resolver.notes, *outcome.notes, *packer.relaxed],
            topology=bool(outcome.requirements)
            or any(
                c.host.anti or c.host.affinity or c.host.spread or c.host.repels or c.ports for c in classes
            ),
            existing_only=outcome.existing_only,
            phases=outcome.phases,
        )

    def _start(
        self,
        pods: Sequence[Pod],
        skip: Mapping[str, set[str]],
        avoid: Mapping[str, Requirements],
        sort_key: str,
        *,
        placed_only: bool = False,
    ) -> tuple[Resolver, Outcome, list[PodClass], Packer]:
        """Domains, classes of the pods given one, and a packer with the existing nodes filled."""
        resolver = Resolver(self.views, self.cache, self.dims, self.shapes)
        outcome = self._domains(resolver, pods, skip, avoid, placed_only=placed_only)
        terms = Terms()
        repels = existing_repels(self.existing, terms, self.namespaces)
        matcher = Matcher(terms)
        pins: Mapping[str, Requirements] = outcome.requirements
        if placed_only:
            # Pods without topology rules get no domain, but stay out of what they avoid too.
            pins = {**avoid, **outcome.requirements}
        classes = build_classes(
            [p for p in pods if p.key not in outcome.failed],
            shapes=self.shapes,
            resolver=resolver,
            terms=terms,
            matcher=matcher,
            namespaces=self.namespaces,
            pins=pins,
            skip=skip,
            sort=sort_key,
            shared=self._shared(pods),
        )
        return resolver, outcome, classes, self._fill_existing(classes, terms, matcher, repels)

    def bind_last(
        self,
        planned_nodes: Sequence[PlannedNode],
        placed: Mapping[str, tuple[Pod, ...]],
        pods: Sequence[Pod],
        sort_key: str,
    ) -> _Last:
        """Place `pods` after every pod of the plan (`planned_nodes`, `placed` on existing nodes) on
        its planned and existing nodes, no new node: as the rounds do, with the plan's pods
        counted as running (lastbind.py)."""
        views = {v.provisioner.name: v for v in self.views}
        uncertain = [lastbind.uncertain_keys(n) for n in planned_nodes]
        planned = [
            lastbind.as_existing(i, n, views[n.provisioner], self.dims) for i, n in enumerate(planned_nodes)
        ]
        worlds = list(zip(planned, uncertain, strict=True))
        pods = [p for p in pods if lastbind.world_free(p, worlds, self.namespaces)]
        avoid = {p.key: lastbind.avoid(p, worlds, self.namespaces) for p in pods}
        if not pods:
            return _Last(list(planned_nodes), dict(placed))
        cluster = [lastbind.with_pods(n, placed.get(n.name, ()), self.dims) for n in self.existing]
        context = _Context(
            self.views, self.cache, self.dims, [*cluster, *planned], self.namespaces, self.usage, 0
        )
        context.shapes, context.shared = self.shapes, self.shared
        everywhere = set(views)
        resolver, outcome, classes, packer = context._start(
            pods, {p.key: everywhere for p in pods}, avoid, sort_key, placed_only=True
        )
        # No new node will come: ScheduleAnyway hostname rules that held pods back are relaxed.
        for pod_class in classes:
            if packer.cursors.left(pod_class) and pod_class.host.soft:
                packer.refill_relaxed(pod_class)
        added = {n.existing.name: n.pods for n in packer.existing if n.pods and n.existing}
        nodes = list(planned_nodes)
        for i, node in enumerate(planned):
            if more := added.pop(node.name, None):
                request = Resources(
                    dict(
                        zip(self.dims, map(sum, zip(*map(resolver.request, more), strict=True)), strict=True)
                    )
                )
                nodes[i] = replace(
                    nodes[i], pods=(*nodes[i].pods, *more), requests=nodes[i].requests + request
                )
        existing = dict(placed)
        for name, more in added.items():
            existing[name] = (*existing.get(name, ()), *more)
        bound = [p for ps in added.values() for p in ps] + [
            p for n, m in zip(nodes, planned_nodes, strict=True) for p in n.pods[len(m.pods) :]
        ]
        # The planner notes preferences relaxed for every pod it gave a domain: keep the placed ones'.
        keys = {p.key for p in bound}
        notes = [n for n in outcome.notes if n.rpartition(" of pod ")[2] in keys] + packer.relaxed
        return _Last(nodes, existing, bound, outcome.phases, notes, outcome.failed)

    def _shared(self, pods: Sequence[Pod]) -> frozenset[str]:
        if self.shared is None:
            self.shared = shared_claims.shared(pods, self.existing)
        return self.shared

    def _domains(
        self,
        resolver: Resolver,
        pods: Sequence[Pod],
        skip: Mapping[str, set[str]],
        avoid: Mapping[str, Requirements],
        *,
        placed_only: bool = False,
    ) -> Outcome:
        """Domain pins and exclusions for pods with topology rules on keys other than the hostname."""
        planner = DomainPlanner(
            self.existing,
            self.namespaces,
            _NewNodes(resolver, skip),
            avoid,
            shapes=self.shapes,
            placed_only=placed_only,
        )
        ranked = sorted(pods, key=lambda p: (-p.requests.cpu, -p.requests.memory))
        return planner.plan(pods, {pod.key: i for i, pod in enumerate(ranked)})

    def _fill_existing(
        self,
        classes: Sequence[PodClass],
        terms: Terms,
        matcher: Matcher,
        repels: Mapping[str, tuple[int, ...]],
    ) -> Packer:
        """A packer with every existing node counted and karpy's schedulable ones filled first-fit."""
        min_request = tuple(min((c.request[i] for c in classes), default=0.0) for i in range(len(self.dims)))
        packer = Packer(self.cache, min_request, limits.headroom(self.provisioners, self.usage))
        for node in self.existing:
            # Without a hostname term in play no running pod counts for one: skip the pods.
            packer.add_existing(
                node, self.dims, matcher, lambda p: repels.get(p.key, ()), count_pods=bool(terms.ids)
            )
        if packer.existing:
            for pod_class in classes:
                packer.fill_existing(pod_class)
        return packer


@dataclass(frozen=True)
class _NewNodes:
    """The domain planner's questions about new nodes, answered by the round's resolver; `skip`:
    pod key -> Provisioners its new nodes may not come from."""

    resolver: Resolver
    skip: Mapping[str, set[str]]

    def reachable(self, pod: Pod, key: str, extra: Requirements) -> frozenset[str]:
        return self.resolver.domains(pod, key, extra, fit=True, excluded=self.skip.get(pod.key, ()))

    def possible(self, pod: Pod, key: str, spread: TopologySpread) -> frozenset[str]:
        return self.resolver.domains(
            pod,
            key,
            Requirements(),
            fit=False,
            honor_affinity=spread.node_affinity_policy == HONOR,
            honor_taints=spread.node_taints_policy == HONOR,
        )

    def may_share(self, counted: Pod, pod: Pod, spread: TopologySpread) -> bool:
        return self.resolver.may_share(
            counted,
            pod,
            honor_affinity=spread.node_affinity_policy == HONOR,
            honor_taints=spread.node_taints_policy == HONOR,
        )
