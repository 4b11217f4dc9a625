"""Why a pod waits: for each Provisioner/NodePool in weight order, either the node the solver would
launch for the pod with only that pool, or the first rule that excludes the pod, in a user's words.

Pure: plain data in (`World`), `Explanation` out. The verdict comes from the real solver first
(`World.solve` with only the pool); the rule checks run only for pools it refuses and in the order
a launch meets them (taint, requirements, resources, type size, minValues, limits), so a reason
never contradicts a plan. A pool the checks pass but the solver still refuses is explained by the
solver's own reason (spread, anti-affinity, hostname rules). Each rule's words name what the pod
asks and what the pool allows. `remedy.py` finds the smallest change that admits the pod.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace

from extender.api import labels as wk
from extender.api.pod import Pod
from extender.api.provisioner import Provisioner
from extender.api.resources import CPU, MEMORY, PODS, Resources
from extender.scheduling import limits, minvalues, reservations
from extender.scheduling.candidates import CandidateCache, Entry, ProvisionerView, fits, gpu_kinds, vector
from extender.scheduling.constraints import affinity_terms, describe_taint, pod_terms
from extender.scheduling.instancetypes import InstanceType, OfferingKey
from extender.scheduling.plan import ExistingNode, Plan
from extender.scheduling.pool_choice import ordered
from extender.scheduling.requirements import Requirements, ValueSet
from extender.scheduling.solver import dimensions, solve
from extender.scheduling.topology import NamespaceLabels
from extender.scheduling.views import VIEWS

# The rule codes: a fixed, small set (the `reason` label of karpy_pods_pending reads them).
LAUNCH = "launch"
EXISTING = "existing"
SELECTOR = "selector"
TAINT = "taint"
REQUIREMENT = "requirement"
VOLUME_ZONE = "volume_zone"
UNKNOWN_RESOURCE = "unknown_resource"
NO_TYPE = "no_type"
TOO_BIG = "too_big"
MIN_VALUES = "min_values"
LIMIT = "limit"
SPREAD = "spread"
ANTI_AFFINITY = "anti_affinity"
AFFINITY = "affinity"
OTHER = "other"
#: Check order: a pool failing a later check came closer to taking the pod (relevance, `ranked`).
RULES = (
    SELECTOR,
    TAINT,
    REQUIREMENT,
    VOLUME_ZONE,
    UNKNOWN_RESOURCE,
    NO_TYPE,
    TOO_BIG,
    MIN_VALUES,
    LIMIT,
    SPREAD,
    AFFINITY,
    ANTI_AFFINITY,
    OTHER,
)
ADMITS = (LAUNCH, EXISTING)


@dataclass(frozen=True)
class World:
    """What the solver plans against, as `solve` takes it."""

    provisioners: Sequence[Provisioner]
    instance_types: Sequence[InstanceType]
    daemonsets: Sequence[Pod] = ()
    existing_nodes: Sequence[ExistingNode] = ()
    usage: Mapping[str, Resources] = field(default_factory=dict)
    namespaces: NamespaceLabels | None = None
    unavailable: Collection[OfferingKey] = frozenset()

    def solve(self, pod: Pod, provisioners: Sequence[Provisioner] | None = None) -> Plan:
        """The plan for the pod alone; with `provisioners`, only their existing nodes take pods."""
        pools = self.provisioners if provisioners is None else provisioners
        names = {p.name for p in pools}
        existing = [
            n if n.provisioner in names or not n.schedulable else replace(n, schedulable=False)
            for n in self.existing_nodes
        ]
        return solve(
            [pod],
            pools,
            self.instance_types,
            daemonsets=self.daemonsets,
            existing_nodes=existing,
            unavailable=frozenset(self.unavailable),
            usage=self.usage,
            with_bound=False,
            namespaces=self.namespaces,
            search_budget=0,
        )

    def with_provisioner(self, pool: Provisioner) -> World:
        return replace(self, provisioners=[pool if p.name == pool.name else p for p in self.provisioners])


@dataclass(frozen=True)
class Placement:
    """Where a plan puts the pod: a new node (type, zone, capacity type, $/h) or an existing one."""

    provisioner: str
    node: str
    instance_type: str = ""
    zone: str = ""
    capacity_type: str = ""
    price: float = 0.0

    def describe(self) -> str:
        if self.instance_type:
            return (
                f"would launch {self.instance_type} ({self.capacity_type}, {self.zone}, ${self.price:.4f}/h)"
            )
        return f"fits on existing node {self.node}"


def placement(plan: Plan, pod: Pod) -> Placement | None:
    for node in plan.nodes:
        if any(p.key == pod.key for p in node.pods):
            return Placement(
                node.provisioner, "", node.instance_type.name, node.zone, node.capacity_type, node.price
            )
    for name, pods in plan.existing.items():
        if any(p.key == pod.key for p in pods):
            return Placement("", name)
    return None


@dataclass(frozen=True)
class Verdict:
    """One pool's answer for the pod: `rule` is LAUNCH/EXISTING or the code of the first rule that
    excludes it; `detail` carries what remedy.py edits (the key, values, taint, resource)."""

    pool: Provisioner
    rule: str
    message: str
    placement: Placement | None = None
    detail: Mapping[str, object] = field(default_factory=dict)

    @property
    def admits(self) -> bool:
        return self.rule in ADMITS

    @property
    def pool_name(self) -> str:
        return f"{self.pool.kind} {self.pool.name}"

    def line(self) -> str:
        return f"{self.pool_name}: {self.message}"


@dataclass(frozen=True)
class Explanation:
    pod: Pod
    #: Weight order.
    verdicts: tuple[Verdict, ...]
    #: The plan with every pool (what karpy does now).
    placement: Placement | None = None

    @property
    def admitted(self) -> bool:
        return self.placement is not None

    def ranked(self) -> list[Verdict]:
        """Most relevant first: pools that take the pod, then those that failed a later check
        (closer to taking it), weight order among equals."""
        order = {rule: i for i, rule in enumerate((*ADMITS, *reversed(RULES)))}
        return sorted(self.verdicts, key=lambda v: order.get(v.rule, len(order)))

    @property
    def reason(self) -> str:
        """The pod's reason code: its most relevant pool's rule (`other` without pools)."""
        ranked = self.ranked()
        return ranked[0].rule if ranked else OTHER


def explain(pod: Pod, world: World) -> Explanation:
    """The verdict of every pool for `pod`, and where the solver with every pool puts it."""
    dims = dimensions([pod], world.daemonsets)
    cache = CandidateCache(world.unavailable)
    verdicts = []
    for pool in ordered(world.provisioners):
        view = VIEWS.view_of(pool, world.instance_types, world.daemonsets, dims)
        verdicts.append(_verdict(pod, pool, view, cache, dims, world))
    return Explanation(pod, tuple(verdicts), placement(world.solve(pod), pod))


def _verdict(
    pod: Pod,
    pool: Provisioner,
    view: ProvisionerView,
    cache: CandidateCache,
    dims: Sequence[str],
    world: World,
) -> Verdict:
    plan = world.solve(pod, [pool])
    if (where := placement(plan, pod)) is not None:
        return Verdict(pool, LAUNCH if where.instance_type else EXISTING, where.describe(), where)
    return _first_rule(pod, pool, view, cache, dims, world) or _solver_rule(pod, pool, plan)


def _first_rule(
    pod: Pod,
    pool: Provisioner,
    view: ProvisionerView,
    cache: CandidateCache,
    dims: Sequence[str],
    world: World,
) -> Verdict | None:
    noun = f"{pool.kind} {pool.name}"
    wanted = wk.owner_of(pod.node_selector)
    if wanted and not pool.selected_by(pod.node_selector):
        # Karpenter: a pod naming its pool by label lands on that pool's nodes only.
        return Verdict(pool, SELECTOR, f"the pod selects {wanted} by its nodeSelector, not {noun}")
    if taint := pod.tolerates(pool.taints):
        # kube-scheduler TaintToleration: NoSchedule/NoExecute taints need a toleration.
        return Verdict(
            pool,
            TAINT,
            f"taint {describe_taint(taint)} of {noun} is not tolerated by the pod",
            detail={"taint": taint},
        )
    own = _requirement_rule(pod, pool, view, affinity_terms(pod), REQUIREMENT)
    if own is not None:
        return own
    if pod.volume_terms:
        volumes = _requirement_rule(pod, pool, view, pod_terms(pod), VOLUME_ZONE)
        if volumes is not None:
            return volumes
    if missing := view.unlisted(pod.requests):
        # kube-scheduler NodeResourcesFit: a resource the node does not list has allocatable 0.
        return Verdict(
            pool,
            UNKNOWN_RESOURCE,
            f"the pod requests {', '.join(missing)}; no instance type {noun} may launch has it",
            detail={"resources": missing},
        )
    gpus = gpu_kinds(pod.requests)
    request = vector(pod.requests + Resources({PODS: 1}), dims)
    for term in pod_terms(pod):
        base = view.requirements.intersect(term)
        found = cache.lookup(view, base, gpus).candidates
        if not found:
            return _no_type(pod, pool, view, cache, term, gpus)
        holding = [c for c in found if fits(request, c.entry.alloc)]
        if not holding:
            return _too_big(pool, [c.entry for c in found], request, dims)
        if view.min_values:
            types = [c.entry.type for c in holding]
            if short := minvalues.unmet(types, view.min_values, base):
                return _min_values(pool, view, types, short, base)
        room = limits.headroom([pool], world.usage).get(pool.name)
        if room is not None and not any(room.allows(c.entry.type) for c in holding):
            return _limit(pool, room, [c.entry.type for c in holding], world.usage)
    return None


def _requirement_rule(
    pod: Pod, pool: Provisioner, view: ProvisionerView, terms: Sequence[Requirements], rule: str
) -> Verdict | None:
    """The first key whose values the pod's terms and the pool's requirements leave none of, when
    every ORed term has one (kube-scheduler NodeAffinity; Karpenter's requirement compatibility)."""
    found: Verdict | None = None
    for term in terms:
        if view.requirements.intersect(term).conflict(view.keys) is None:
            return None
        found = found or _key_conflict(pool, view, term, rule)
    return found


def _key_conflict(pool: Provisioner, view: ProvisionerView, term: Requirements, rule: str) -> Verdict:
    noun = f"{pool.kind} {pool.name}"
    defined = {*view.keys, *wk.WELL_KNOWN_LABELS, *wk.INSTANCE_TYPE_LABELS, *wk.RESERVATION_LABELS}
    for key, wants in term:
        allows = view.requirements.get(key)
        both = allows.intersect(wants)
        needs_value = key in wk.WELL_KNOWN_LABELS or not both.allow_absent
        detail = {"key": key, "wants": wants, "allows": allows}
        what = "the pod's volume is in" if rule == VOLUME_ZONE else "the pod requires"
        if needs_value and not both.any_value():
            return Verdict(
                pool,
                rule,
                f"{what} {describe_values(key, wants)}; {noun} allows only {describe_allowed(allows)}",
                detail=detail,
            )
        if needs_value and key not in defined:
            return Verdict(
                pool,
                rule,
                f"{what} {describe_values(key, wants)}; {noun} does not set label {key}",
                detail={**detail, "unset": True},
            )
    conflict = view.requirements.intersect(term).conflict(view.keys)
    return Verdict(pool, rule, f"{conflict} on {noun}")


def _no_type(
    pod: Pod,
    pool: Provisioner,
    view: ProvisionerView,
    cache: CandidateCache,
    term: Requirements,
    gpus: frozenset[str],
) -> Verdict:
    """No type the pool allows meets the pod's requirements: which key of the pod rules them out."""
    noun = f"{pool.kind} {pool.name}"
    if not cache.lookup(view, view.requirements, gpus).candidates:
        return Verdict(pool, NO_TYPE, f"no instance type {noun} allows has an available offering")
    for key, wants in term:
        single = view.requirements.intersect(Requirements.of({key: wants}))
        if not cache.lookup(view, single, gpus).candidates:
            full = key in wk.RESERVATION_LABELS and reservations.used_up(
                (e.type for e in view.entries), single
            )
            return Verdict(
                pool,
                NO_TYPE,
                f"the pod requires {describe_values(key, wants)}; "
                + (
                    f"{reservations.USED_UP} ({noun})"
                    if full
                    else f"no instance type {noun} allows offers it"
                ),
                detail={"key": key, "wants": wants, "allows": view.requirements.get(key)},
            )
    return Verdict(
        pool,
        NO_TYPE,
        f"no instance type {noun} allows meets all of the pod's requirements ({term.describe()})",
    )


def _too_big(
    pool: Provisioner, entries: Sequence[Entry], request: Sequence[float], dims: Sequence[str]
) -> Verdict:
    noun = f"{pool.kind} {pool.name}"
    for i, name in enumerate(dims):
        largest = max(entries, key=lambda e: (e.alloc[i], e.type.name))
        if request[i] > largest.alloc[i] + 1e-9:
            return Verdict(
                pool,
                TOO_BIG,
                f"requests {amount(name, request[i])}; the largest type {noun} allows has"
                f" {amount(name, largest.alloc[i], unit=False)} allocatable ({largest.type.name})",
                detail={"resource": name},
            )
    wanted = ", ".join(amount(n, request[i]) for i, n in enumerate(dims) if request[i] and n != PODS)
    return Verdict(pool, TOO_BIG, f"no type {noun} allows holds {wanted} at once", detail={})


def _min_values(
    pool: Provisioner,
    view: ProvisionerView,
    types: Sequence[InstanceType],
    short: Sequence[str],
    base: Requirements,
) -> Verdict:
    # Karpenter SatisfiesMinValues: a launch's types must span minValues distinct values of the key.
    key = short[0]
    least = dict(view.min_values)[key]
    seen = sorted({v for t in types for v in minvalues.values(t, key, base)})
    return Verdict(
        pool,
        MIN_VALUES,
        f"{pool.kind} {pool.name} needs {least} values of {key} among a node's instance types;"
        f" the types that hold the pod give {len(seen)} ({', '.join(seen) or 'none'})",
        detail={"key": key, "available": len(seen)},
    )


def _limit(
    pool: Provisioner, room: limits.Room, types: Sequence[InstanceType], usage: Mapping[str, Resources]
) -> Verdict:
    """The first limited resource the smallest type that holds the pod overruns (Karpenter counts a
    node's capacity against the pool's limits)."""
    used = usage.get(pool.name, Resources())
    for name in room.names:
        need = min(limits.amount(t, name) for t in types)
        if need > room.left.get(name) + limits.EPS:
            smallest = min(types, key=lambda t: (limits.amount(t, name), t.name))
            return Verdict(
                pool,
                LIMIT,
                f"{pool.kind} {pool.name} is at its {name} limit: {amount(name, used.get(name), unit=False)}"
                f" of {amount(name, pool.limits.get(name), unit=False)} used, the pod needs"
                f" {amount(name, need, unit=False)} ({smallest.name})",
                detail={"resource": name, "raise_to": used.get(name) + need},
            )
    return Verdict(
        pool, LIMIT, f"{pool.kind} {pool.name}'s limits leave no type that holds the pod ({room.describe()})"
    )


def _solver_rule(pod: Pod, pool: Provisioner, plan: Plan) -> Verdict:
    """The solver's reason for a pool every rule check passed: topology, named by the rule."""
    reason = next((u.reason for u in plan.unschedulable if u.pod.key == pod.key), "not planned")
    lowered = reason.lower()
    if "anti-affinity" in lowered or ("(anti-)affinity" in lowered and pod.pod_anti_affinity):
        rule = ANTI_AFFINITY
    elif "spread" in lowered and pod.topology_spread:
        rule = SPREAD
    elif "affinity" in lowered:
        rule = AFFINITY
    elif wk.owner_of(pod.node_selector) is None and "limits exceeded" in lowered:
        rule = LIMIT
    else:
        rule = OTHER
    return Verdict(pool, rule, reason)


def describe_values(key: str, values: ValueSet) -> str:
    """What a pod asks of a key, as a user writes it: `kubernetes.io/arch=amd64`."""
    if not values.complement:
        if not values.values:
            return f"no {key} label"
        listed = sorted(values.values)
        return f"{key}={listed[0]}" if len(listed) == 1 else f"{key} in ({', '.join(listed)})"
    if values.values:
        return f"{key} not in ({', '.join(sorted(values.values))})"
    return f"{key} {values.describe()}"


def describe_allowed(values: ValueSet) -> str:
    if not values.complement:
        return ", ".join(sorted(values.values)) or "no value"
    return f"values not in ({', '.join(sorted(values.values))})" if values.values else values.describe()


def amount(name: str, value: float, *, unit: bool = True) -> str:
    """A resource amount a user reads: `70 CPU`, `600Gi memory`, `3 nvidia.com/gpu`."""
    if name == MEMORY:
        figure = f"{value / 2**30:.4g}Gi"
    elif name == CPU:
        figure = f"{math.floor(value * 1000 + 1e-6) / 1000:g}"
    else:
        figure = f"{value:g}"
    if not unit:
        return figure
    return f"{figure} CPU" if name == CPU else f"{figure} {name}"


#: Longest Event message (the API server's Event note limit is 1 KiB).
MESSAGE_LIMIT = 1024


def summary(explanation: Explanation, limit: int = MESSAGE_LIMIT) -> str:
    """The Event text: the most relevant pools' reasons in full while they fit, then "+N more"
    naming every other pool by its rule; never cut mid-word, and no pool name lost while the names
    alone fit (past that, "+N more" counts the rest)."""
    ranked = [v for v in explanation.ranked() if not v.admits]
    head = "no Provisioner or NodePool can launch a node for the pod: "
    full = head + "; ".join(v.line() for v in ranked)
    if len(full) <= limit:
        return full
    for shown in range(len(ranked) - 1, -1, -1):
        text = head + "; ".join(v.line() for v in ranked[:shown])
        rest = _names(ranked[shown:], limit - len(text) - 2)
        if rest is not None:
            return f"{text}; {rest}" if shown else head + rest
    return head + _counted(ranked, limit - len(head))


def _names(rest: Sequence[Verdict], room: int) -> str | None:
    """ "+N more: taint: a, b; requirement: c" when it fits in `room`, else None."""
    by_rule: dict[str, list[str]] = {}
    for v in rest:
        by_rule.setdefault(v.rule, []).append(v.pool.name)
    text = f"+{len(rest)} more: " + "; ".join(
        f"{rule}: {', '.join(names)}" for rule, names in by_rule.items()
    )
    return text if len(text) <= room else None


def _counted(ranked: Sequence[Verdict], room: int) -> str:
    """As many pool names as fit, whole, then "+N more"."""
    names: list[str] = []
    for i, v in enumerate(ranked):
        tail = f" +{len(ranked) - i - 1} more" if i < len(ranked) - 1 else ""
        candidate = ", ".join([*names, f"{v.pool.name} ({v.rule})"])
        if len(candidate) + len(tail) > room:
            return ", ".join(names) + f" +{len(ranked) - i} more"
        names.append(f"{v.pool.name} ({v.rule})")
    return ", ".join(names)
