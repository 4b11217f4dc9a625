"""Topology rules on any key but the hostname, resolved to node requirements before packing.

kube-scheduler's PodTopologySpread and InterPodAffinity filters are the reference. Each batch pod
that carries such a rule, or that such a rule of a batch pod counts, is given a domain per key
(`topology.kubernetes.io/zone: us-west-2b`, `karpenter.sh/capacity-type: spot`, a Provisioner
label, ...) in turn, so the pods after it see it counted; the domain becomes an `In` requirement,
and the packer then only places the pod on nodes in that domain. Counts start from the pods
already bound to every node of the cluster.

Spread skew is checked conservatively, so a plan that passes here passes kube-scheduler when the
pods bind in the plan's bind order: a domain's count includes every batch pod that may end up
counted there, while the minimum over domains counts only pods that surely are, and the domains
include every value a new node could take for the pod (as Karpenter does), so the minimum is never
over-estimated.

Bind order: kube-scheduler's PodTopologySpread filter checks only the incoming pod's own
constraints (pkg/scheduler/framework/plugins/podtopologyspread/filtering.go), so no pod is refused
a domain for the spread of pods placed there before it. A pod that would put such a pod over its
maxSkew takes its domain as if that pod were not there, and a later bind phase: every pod of an
earlier phase binds before it, so each pod's rules hold when it binds. Phases follow the order
pods get domains (a pod never binds before a pod given a domain before it), so the pods a rule
counts or follows are bound by the time the rule is checked.

Preferences (ScheduleAnyway spread, preferred pod (anti-)affinity) are applied while a domain
remains; the rest are relaxed, heaviest first within a kind as Karpenter does, and reported.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple, Protocol

from extender.api import labels as wk
from extender.api.affinity import HONOR, TopologySpread
from extender.api.pod import Pod
from extender.api.resources import PODS
from extender.scheduling.constraints import affinity_terms, pod_terms
from extender.scheduling.plan import ExistingNode
from extender.scheduling.requirements import Requirements, ValueSet
from extender.scheduling.shape import PLACEMENT, Shapes
from extender.scheduling.topology import AllOf, NamespaceLabels, Term, affinity_term, spread_term

SPREAD, AFFINITY, ANTI = "spread", "affinity", "anti"
#: Keep order for preferences: Karpenter relaxes preferred affinity first and ScheduleAnyway
#: spread last, so a conflicting pair keeps the one Karpenter would keep.
_KEEP_ORDER = {SPREAD: 0, ANTI: 1, AFFINITY: 2}

#: Labels every node karpy launches carries, whatever its domain on other keys.
ALWAYS_LABELLED = frozenset(
    {wk.HOSTNAME, wk.ZONE, wk.INSTANCE_TYPE, wk.ARCH, wk.OS, wk.CAPACITY_TYPE, *wk.OWNER_LABELS}
)


@dataclass(frozen=True)
class Rule:
    kind: str
    key: str
    term: Term | AllOf
    hard: bool
    weight: int = 0
    spread: TopologySpread | None = None

    def describe(self) -> str:
        what = {SPREAD: "topology spread", AFFINITY: "pod affinity", ANTI: "pod anti-affinity"}[self.kind]
        return f"{'' if self.hard else 'preferred '}{what} on {self.key}"


def rules_of(pod: Pod, namespace_labels: NamespaceLabels | None, *, hostname: bool = False) -> list[Rule]:
    """The pod's topology rules on non-hostname keys (or only hostname ones)."""
    rules = [
        Rule(SPREAD, s.topology_key, spread_term(pod, s.selector), s.hard, spread=s)
        for s in pod.topology_spread
    ]
    for kind, hard, terms in (
        (AFFINITY, True, ((0, t) for t in pod.pod_affinity)),
        (ANTI, True, ((0, t) for t in pod.pod_anti_affinity)),
        (AFFINITY, False, ((w.weight, w.term) for w in pod.preferred_pod_affinity)),
        (ANTI, False, ((w.weight, w.term) for w in pod.preferred_pod_anti_affinity)),
    ):
        rules += [
            Rule(kind, t.topology_key, affinity_term(pod, t, namespace_labels), hard, weight)
            for weight, t in terms
        ]
    required = [r for r in rules if r.kind == AFFINITY and r.hard]
    if len(required) > 1:
        # kube-scheduler counts, for every required affinity term, the pods matching all of them.
        every = AllOf(tuple(t for r in required for t in _terms(r.term)))
        rules = [Rule(r.kind, r.key, every, True) if r in required else r for r in rules]
    return [r for r in rules if (r.key == wk.HOSTNAME) == hostname]


def _terms(counted: Term | AllOf) -> tuple[Term, ...]:
    return counted.terms if isinstance(counted, AllOf) else (counted,)


# What a rule counts matching pods by, and the key under which pods alike are counted alike.
Counted = Term | AllOf
Signature = Hashable
# (term, topology key, the spread, signature): pods spreading alike.
SpreadGroup = tuple[Counted, str, TopologySpread | None, Signature]
#: An existing node and its labels (GA keys added).
Labelled = tuple[ExistingNode, Mapping[str, str]]


class NewNodes(Protocol):
    """What the nodes karpy could launch offer a pod (the solver asks its resolver)."""

    def reachable(self, pod: Pod, key: str, extra: Requirements) -> frozenset[str]:
        """Domains of `key` a new node could take for the pod, within `extra`."""

    def possible(self, pod: Pod, key: str, spread: TopologySpread) -> frozenset[str]:
        """Domains new nodes could add to the count of the pod's spread constraint."""

    def may_share(self, counted: Pod, pod: Pod, spread: TopologySpread) -> bool:
        """Whether a new node `counted` can land on may be one `pod`'s spread constraint counts
        (its policies honour node affinity / taints)."""


@dataclass
class Outcome:
    #: pod key -> extra node requirements (domain pins, excluded domains).
    requirements: dict[str, Requirements] = field(default_factory=dict)
    #: pod key -> domains it was pinned to that only existing nodes offer (they may lack room).
    existing_only: dict[str, Requirements] = field(default_factory=dict)
    #: pod key -> why no domain satisfies the pod's rules.
    failed: dict[str, str] = field(default_factory=dict)
    #: pod key -> bind phase, for pods that must bind after every pod of the phases before (>= 1).
    phases: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def note_existing_only(self, pod: Pod, pins: Sequence[tuple[str, str]]) -> None:
        """Record the (key, domain) pins of the pod that only existing nodes offer. Kept even when
        the pod fails or waits: the solver then tries it away from them."""
        for key, domain in pins:
            only = self.existing_only.get(pod.key, Requirements())
            self.existing_only[pod.key] = only.intersect(_not_in(key, {domain}))


class Step(Enum):
    """What came of a pod's turn: its domains given (or its failure final), or a wait for the pods
    its required affinity follows."""

    DONE = "done"
    LATER = "later"


@dataclass(frozen=True)
class Cluster:
    """The existing nodes, labelled, and the namespaces' labels."""

    nodes: tuple[Labelled, ...]
    namespace_labels: NamespaceLabels | None


@dataclass(frozen=True)
class Scope:
    """What the round allows the pods."""

    #: pod key -> domains to stay out of (a previous round found no room there).
    avoid: Mapping[str, Requirements]
    #: The pods go only onto nodes already there (solver's last binds): a key no new node
    #: carries is still pinned to a domain those nodes offer.
    placed_only: bool


@dataclass
class Tally:
    """Where the pods given domains so far went, as the rules of the pods after them count them."""

    #: Required anti-affinity of pods (existing, then batch as they get domains): (term, key, domain).
    repellers: list[tuple[Counted, str, str]]
    #: (term, key) -> domain -> (signature, pinned keys) -> how many batch pods counted there.
    batch: dict[tuple[Counted, str], dict[str, Counter[tuple[Hashable, frozenset[str]]]]] = field(
        default_factory=dict
    )
    #: signature -> one batch pod with it (pods alike in signature land alike).
    alike: dict[Hashable, Pod] = field(default_factory=dict)
    #: (signature, key) -> domain -> how many pods alike were pinned there (the next follows them).
    sticky: defaultdict[Hashable, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))

    def repelled(self, pod: Pod, key: str) -> set[str]:
        return {domain for term, k, domain in self.repellers if k == key and term.selects(pod)}

    def count(
        self,
        pod: Pod,
        signature: Signature,
        rules: Sequence[Rule],
        pins: Mapping[str, str],
        counting: Sequence[tuple[Counted, str]],
    ) -> None:
        """Count the pod where it was pinned, for every batch rule that counts it there (`counting`:
        the batch rules' (term, key) whose term selects the pod)."""
        pinned = frozenset(pins) | ALWAYS_LABELLED
        for key, domain in pins.items():
            for term, counted_key in counting:
                if counted_key == key:
                    self.batch.setdefault((term, key), {}).setdefault(domain, Counter())[
                        (signature, pinned)
                    ] += 1
            self.sticky[(signature, key)][domain] += 1
            self.repellers += [
                (r.term, key, domain) for r in rules if r.kind == ANTI and r.hard and r.key == key
            ]


@dataclass
class Phase:
    """The bind phase pods given domains now join; pods of earlier phases bind before them."""

    number: int = 0
    #: Batch pods of this phase with a required spread, grouped by rule and signature:
    #: (a pod, its rule, its spread keys, the domains the group's pods went to).
    spreaders: dict[SpreadGroup, tuple[Pod, Rule, frozenset[str], set[str]]] = field(default_factory=dict)

    def advance(self) -> None:
        """The spreading pods a pod would crowd bind first; nothing later can crowd them."""
        self.number += 1
        self.spreaders = {}

    def join(
        self,
        pod: Pod,
        signature: Signature,
        rules: Sequence[Rule],
        spread_keys: frozenset[str],
        pins: Mapping[str, str],
    ) -> None:
        for key, domain in pins.items():
            for rule in rules:
                if rule.kind == SPREAD and rule.hard and rule.key == key:
                    group = (rule.term, key, rule.spread, signature)
                    self.spreaders.setdefault(group, (pod, rule, spread_keys, set()))[3].add(domain)


@dataclass
class _Memos:
    """Answers that depend only on their keys, kept for the planner's life."""

    #: (pod namespace, labels) -> the batch rules' (term, key) that count the pod (`_counting`).
    counting: dict[Hashable, tuple[tuple[Counted, str], ...]] = field(default_factory=dict)
    #: (pod namespace, labels) -> keys on which some batch pod's rule counts the pod.
    counted_keys: dict[Hashable, frozenset[str]] = field(default_factory=dict)
    #: (id of a spreader's term, pod namespace and labels) -> selects; the terms live as long as
    #: the batch's rules (`plan`), so ids are not reused while the memo lives.
    selects: dict[Hashable, bool] = field(default_factory=dict)
    may_count: dict[Hashable, bool] = field(default_factory=dict)
    existing_counts: dict[Hashable, Counter[str]] = field(default_factory=dict)
    existing_domains: dict[Hashable, set[str]] = field(default_factory=dict)


class _Turn(NamedTuple):
    """A pod's turn: its rules and the keys it is given domains on, in order."""

    pod: Pod
    rules: tuple[Rule, ...]
    #: Keys on which some batch pod's rule counts this pod.
    counted_keys: frozenset[str]
    keys: tuple[str, ...]
    spread_keys: frozenset[str]
    #: Its required pod affinity rules.
    affinity: tuple[Rule, ...]
    #: kube-scheduler: when no pod matches any of its affinity terms, a pod matching all its own
    #: terms (the first of its group) may go anywhere.
    first_of_group: bool


@dataclass(slots=True)
class _Draft:
    """What a pod's turn has decided so far."""

    extra: Requirements
    pins: dict[str, str] = field(default_factory=dict)
    #: (key, domain) pins only existing nodes offer, in the order taken.
    existing_only: list[tuple[str, str]] = field(default_factory=list)
    relaxed: list[str] = field(default_factory=list)
    #: Whether a domain it takes would crowd a spreading pod of this phase.
    crowding: bool = False


class _Candidates(NamedTuple):
    """A key's domains for a pod: its rules there, the domains new and existing nodes offer, and
    what its required rules allow of them."""

    own: list[Rule]
    hard: list[Rule]
    repelled: set[str]
    new: frozenset[str]
    existing: set[str]
    allowed: AbstractSet[str]
    #: Whether a required rule holds only where nodes carry the key (spread, affinity).
    needs_key: bool


class DomainPlanner:
    def __init__(
        self,
        existing: Sequence[ExistingNode],
        namespace_labels: NamespaceLabels | None,
        new_nodes: NewNodes,
        avoid: Mapping[str, Requirements] | None = None,
        shapes: Shapes | None = None,
        *,
        placed_only: bool = False,
    ) -> None:
        self.cluster = Cluster(
            tuple((node, wk.with_ga_keys(node.labels)) for node in existing), namespace_labels
        )
        self.new_nodes = new_nodes
        self.scope = Scope(avoid or {}, placed_only)
        self.shapes = shapes or Shapes()
        self.tally = Tally(_running_repellers(self.cluster))
        self.phase = Phase()
        self._memos = _Memos()

    # -- counting -------------------------------------------------------------------------
    def _eligible(
        self, pod: Pod, spread: TopologySpread, labels: Mapping[str, str], node: ExistingNode
    ) -> bool:
        if spread.node_affinity_policy == HONOR and not any(t.matches(labels) for t in affinity_terms(pod)):
            return False
        return spread.node_taints_policy != HONOR or pod.tolerates(node.taints) is None

    def _existing(self, pod: Pod, rule: Rule, keys: frozenset[str]) -> Counter[str]:
        """Matching pods per domain on existing nodes (for spread, on nodes eligible for the pod)."""
        cache_key = (rule.term, rule.key, keys, self.signature(pod) if rule.spread else None, rule.spread)
        if (found := self._memos.existing_counts.get(cache_key)) is None:
            found = Counter()
            for node, labels in self.cluster.nodes:
                if rule.key not in labels or not keys <= labels.keys():
                    continue
                if rule.spread is not None and not self._eligible(pod, rule.spread, labels, node):
                    continue
                if count := sum(1 for p in node.pods if p.key != pod.key and rule.term.selects(p)):
                    found[labels[rule.key]] += count
            self._memos.existing_counts[cache_key] = found
        return found

    def _spread_domains(self, pod: Pod, rule: Rule, keys: frozenset[str]) -> set[str]:
        assert rule.spread is not None
        domains = {
            labels[rule.key]
            for node, labels in self.cluster.nodes
            if keys <= labels.keys() and self._eligible(pod, rule.spread, labels, node)
        }
        return domains | self.new_nodes.possible(pod, rule.key, rule.spread)

    def _batch_counts(self, pod: Pod, rule: Rule, keys: frozenset[str]) -> tuple[Counter[str], Counter[str]]:
        """Batch pods per domain: (may be counted, surely counted) for the incoming pod's rule."""
        maybe: Counter[str] = Counter()
        surely: Counter[str] = Counter()
        signature = self.signature(pod)
        for domain, entries in self.tally.batch.get((rule.term, rule.key), {}).items():
            if rule.spread is None:
                maybe[domain] = surely[domain] = sum(entries.values())
                continue
            spread = rule.spread
            for (sig, pinned), count in entries.items():
                if sig == signature or self.may_count(sig, pod, spread):
                    maybe[domain] += count
                if sig == signature and keys <= pinned:
                    surely[domain] += count
        return maybe, surely

    def _counting(self, pod: Pod, counted: set[tuple[Counted, str]]) -> tuple[tuple[Counted, str], ...]:
        """The batch rules' (term, key) whose term selects this pod, in `counted`'s order (fixed for
        the plan): they depend on its namespace and labels only, which many batch pods share."""
        memo = (pod.namespace, tuple(sorted(pod.labels.items())))
        if (found := self._memos.counting.get(memo)) is None:
            found = self._memos.counting[memo] = tuple(
                (term, key) for term, key in counted if term.selects(pod)
            )
        return found

    def _counted_keys(self, pod: Pod, counted: set[tuple[Counted, str]]) -> frozenset[str]:
        """Keys on which some batch pod's rule counts this pod (depends on namespace and labels only)."""
        memo = (pod.namespace, tuple(sorted(pod.labels.items())))
        if (found := self._memos.counted_keys.get(memo)) is None:
            found = self._memos.counted_keys[memo] = frozenset(key for _, key in self._counting(pod, counted))
        return found

    def signature(self, pod: Pod) -> Signature:
        """What decides which nodes a pod may land on: pods alike here are counted alike."""
        return self.shapes(pod).key(PLACEMENT)

    def may_count(self, signature: Signature, pod: Pod, spread: TopologySpread) -> bool:
        """Whether batch pods of `signature` may end on a node `pod`'s spread constraint counts."""
        memo = (signature, self.signature(pod), spread.node_affinity_policy, spread.node_taints_policy)
        if (found := self._memos.may_count.get(memo)) is None:
            other = self.tally.alike[signature]
            found = self.new_nodes.may_share(other, pod, spread) or any(
                node.schedulable
                and self._fits_node(other, Requirements(), labels, node)
                and self._eligible(pod, spread, labels, node)
                for node, labels in self.cluster.nodes
            )
            self._memos.may_count[memo] = found
        return found

    def _spread_counts(
        self, pod: Pod, rule: Rule, keys: frozenset[str]
    ) -> tuple[Counter[str], Counter[str], int]:
        """For `pod`'s spread rule: running pods per domain, batch pods that may count there, and
        the minimum over the eligible domains of the pods that surely count (0 below minDomains)."""
        assert rule.spread is not None
        existing = self._existing(pod, rule, keys)
        maybe, surely = self._batch_counts(pod, rule, keys)
        domains = self._spread_domains(pod, rule, keys)
        floor = min((existing[d] + surely[d] for d in domains), default=0)
        if rule.spread.min_domains and len(domains) < rule.spread.min_domains:
            floor = 0
        return existing, maybe, floor

    # -- filters ----------------------------------------------------------------------------
    def _allowed(
        self, pod: Pod, rule: Rule, candidates: AbstractSet[str], spread_keys: frozenset[str]
    ) -> set[str]:
        if rule.kind == SPREAD:
            assert rule.spread is not None
            keys = spread_keys if rule.hard else frozenset({rule.key})
            existing, maybe, floor = self._spread_counts(pod, rule, keys)
            own = 1 if rule.term.selects(pod) else 0
            return {d for d in candidates if existing[d] + maybe[d] + own - floor <= rule.spread.max_skew}
        existing = self._existing(pod, rule, frozenset())
        maybe, _ = self._batch_counts(pod, rule, frozenset())
        if rule.kind == ANTI:
            return {d for d in candidates if not existing[d] and not maybe[d]}
        return {d for d in candidates if existing[d] or maybe[d]}

    # -- assignment -------------------------------------------------------------------------
    def plan(self, pods: Sequence[Pod], order: Mapping[str, int]) -> Outcome:
        """Domains for the pods; `order`: pod key -> rank, the order pods alike in what they follow
        take their turns."""
        outcome = Outcome()
        batch_rules = {pod.key: rules_of(pod, self.cluster.namespace_labels) for pod in pods}
        counted: set[tuple[Counted, str]] = {(r.term, r.key) for rules in batch_rules.values() for r in rules}
        repelling_keys = {key for _, key, _ in self.tally.repellers}
        involved = [
            p
            for p in pods
            if batch_rules[p.key]
            or self._counted_keys(p, counted)
            or (repelling_keys and any(self.tally.repelled(p, k) for k in repelling_keys))
        ]
        # Pods followed by others first: a pod's required affinity can only find pods placed before it.
        involved.sort(key=lambda p: (any(r.kind == AFFINITY for r in batch_rules[p.key]), order[p.key]))
        # A pod whose required affinity finds no pod yet waits for the pods it follows (chains too).
        pending = involved
        while pending:
            deferred = [
                p
                for p in pending
                if self._assign(p, batch_rules[p.key], counted, outcome, final=False) is Step.LATER
            ]
            if len(deferred) == len(pending):
                for pod in deferred:
                    self._assign(pod, batch_rules[pod.key], counted, outcome, final=True)
                break
            pending = deferred
        return outcome

    def _assign(
        self, pod: Pod, rules: list[Rule], counted: set[tuple[Counted, str]], outcome: Outcome, *, final: bool
    ) -> Step:
        """Give the pod its domains, key by key; LATER (unless `final`) while a required affinity
        of the pod finds no pod yet."""
        turn = self._turn(pod, rules, counted)
        self.tally.alike.setdefault(self.signature(pod), pod)
        draft = _Draft(self.scope.avoid.get(pod.key, Requirements()))
        failure = None
        for key in turn.keys:
            if (failure := self._take_key(turn, key, draft)) is not None:
                break
        outcome.note_existing_only(pod, draft.existing_only)
        if failure is None:
            self._commit(turn, draft, counted, outcome)
        elif turn.affinity and not final:
            return Step.LATER
        else:
            outcome.failed[pod.key] = failure
        return Step.DONE

    def _turn(self, pod: Pod, rules: list[Rule], counted: set[tuple[Counted, str]]) -> _Turn:
        counted_keys = self._counted_keys(pod, counted)
        # Keys with required rules first: a preference met on one key must not narrow the
        # requirements so far that a required rule on another key has no domain left.
        keys = sorted(
            {r.key for r in rules} | counted_keys | {k for _, k, _ in self.tally.repellers},
            key=lambda k: (not any(r.hard and r.key == k for r in rules), k),
        )
        affinity = tuple(r for r in rules if r.kind == AFFINITY and r.hard)
        first_of_group = (
            bool(affinity)
            and all(r.term.selects(pod) for r in affinity)
            and not any(
                self._existing(pod, r, frozenset()) or self.tally.batch.get((r.term, r.key)) for r in affinity
            )
        )
        spread_keys = frozenset(r.key for r in rules if r.kind == SPREAD and r.hard)
        return _Turn(pod, tuple(rules), counted_keys, tuple(keys), spread_keys, affinity, first_of_group)

    def _take_key(self, turn: _Turn, key: str, draft: _Draft) -> str | None:
        """Narrow the draft on `key` by the pod's rules there; why not, when no domain is left."""
        found = self._candidates(turn, key, draft.extra)
        if found is None:
            return None
        if not found.allowed:
            if found.new or found.needs_key:
                return _failure(found.own, key, found.repelled)
            # New nodes will not carry the key, and a node without it passes anti-affinity
            # and is not counted: keep the pod off the nodes that carry it.
            draft.extra = draft.extra.intersect(_absent(key))
            return None
        allowed, kept = self._prefer(turn, found, draft.relaxed)
        spreads = [r for r in (*found.hard, *kept) if r.kind == SPREAD]
        must_pin = bool(spreads) or key in turn.counted_keys or any(r.kind == ANTI for r in found.hard)
        if (
            not found.new
            and not found.needs_key
            and not self.scope.placed_only
            and not any(r.kind in (SPREAD, AFFINITY) for r in kept)
        ):
            # Only existing nodes carry the key: the pod may also go where it is absent.
            excluded = _absent(key) if must_pin else _not_in(key, (found.existing | found.repelled) - allowed)
            draft.extra = draft.extra.intersect(excluded)
        elif not must_pin:
            draft.extra = draft.extra.intersect(_in(key, allowed))
        else:
            domain = self._least_loaded(turn.pod, key, allowed, found.new, spreads)
            self._pin(turn.pod, key, domain, found.new, draft)
        return None

    def _candidates(self, turn: _Turn, key: str, extra: Requirements) -> _Candidates | None:
        """The key's domains for the pod, None when nothing of the pod's concerns the key."""
        pod = turn.pod
        own = [r for r in turn.rules if r.key == key and not (turn.first_of_group and r in turn.affinity)]
        repelled = self.tally.repelled(pod, key)
        if not own and not repelled and key not in turn.counted_keys:
            return None
        hard = [r for r in own if r.hard]
        new = self.new_nodes.reachable(pod, key, extra)
        existing = self._existing_domains(pod, key, extra)
        allowed = (new | existing) - repelled
        for rule in hard:
            allowed &= self._allowed(pod, rule, allowed, turn.spread_keys)
        needs_key = any(r.kind in (SPREAD, AFFINITY) for r in hard)
        return _Candidates(own, hard, repelled, new, existing, allowed, needs_key)

    def _prefer(
        self, turn: _Turn, found: _Candidates, relaxed: list[str]
    ) -> tuple[AbstractSet[str], list[Rule]]:
        """The allowed domains narrowed by the preferences that leave some, and those kept; the
        rest are noted in `relaxed`."""
        allowed, kept = found.allowed, []
        for rule in sorted(
            (r for r in found.own if not r.hard), key=lambda r: (_KEEP_ORDER[r.kind], r.weight)
        ):
            narrowed = allowed & self._allowed(turn.pod, rule, allowed, turn.spread_keys | {rule.key})
            if narrowed:
                allowed = narrowed
                kept.append(rule)
            else:
                relaxed.append(rule.describe())
        return allowed, kept

    def _least_loaded(
        self, pod: Pod, key: str, allowed: AbstractSet[str], new: frozenset[str], spreads: Sequence[Rule]
    ) -> str:
        """The domain to pin: one new nodes offer, least loaded by its spreads, where pods alike went."""
        load: Counter[str] = Counter()
        # Only a spread that counts the pod itself is evened out by where it goes; one that
        # does not (kube-scheduler's selfMatchNum 0) leaves every allowed domain alike, and
        # steering away from its matching pods would keep the pod off their nodes.
        for rule in (r for r in spreads if r.term.selects(pod)):
            maybe, _ = self._batch_counts(pod, rule, frozenset())
            load.update(self._existing(pod, rule, frozenset()))
            load.update(maybe)
        sticky = self.tally.sticky[(self.signature(pod), key)]
        return min(allowed, key=lambda d: (d not in new, load[d], -sticky[d], d))

    def _pin(self, pod: Pod, key: str, domain: str, new: frozenset[str], draft: _Draft) -> None:
        draft.pins[key] = domain
        # It may break the spread of a pod of this phase placed there before: it binds after
        # that pod (kube-scheduler checks only the incoming pod's own constraints).
        draft.crowding = draft.crowding or bool(self._crowded(pod, key, {domain}))
        draft.extra = draft.extra.intersect(Requirements.from_labels({key: domain}))
        if domain not in new:
            draft.existing_only.append((key, domain))

    def _commit(
        self, turn: _Turn, draft: _Draft, counted: set[tuple[Counted, str]], outcome: Outcome
    ) -> None:
        """The pod's domains given: counted for the pods after it, and its outcome written."""
        pod = turn.pod
        if draft.crowding:
            self.phase.advance()
        if self.phase.number:
            outcome.phases[pod.key] = self.phase.number
        signature = self.signature(pod)
        self.tally.count(pod, signature, turn.rules, draft.pins, self._counting(pod, counted))
        self.phase.join(pod, signature, turn.rules, turn.spread_keys, draft.pins)
        if draft.relaxed:
            outcome.notes.append(f"Relaxed {', '.join(dict.fromkeys(draft.relaxed))} of pod {pod.key}")
        outcome.requirements[pod.key] = draft.extra

    def _crowded(self, pod: Pod, key: str, candidates: AbstractSet[str]) -> set[str]:
        """Domains where one more pod like `pod` would put a spreading pod of this phase there over
        its maxSkew, were that pod to bind after it."""
        crowded: set[str] = set()
        labels_key = (pod.namespace, tuple(sorted(pod.labels.items())))
        for group, (carrier, rule, keys, domains) in self.phase.spreaders.items():
            term, spread_key, spread, _ = group
            if spread_key != key or spread is None:
                continue
            memo = (id(term), labels_key)
            if (hit := self._memos.selects.get(memo)) is None:
                hit = self._memos.selects[memo] = term.selects(pod)
            if not hit:
                continue
            if not self.may_count(self.signature(pod), carrier, spread):
                continue
            existing, maybe, floor = self._spread_counts(carrier, rule, keys)
            crowded |= {
                d for d in domains & candidates if existing[d] + maybe[d] + 1 - floor > spread.max_skew
            }
        return crowded

    def _existing_domains(self, pod: Pod, key: str, extra: Requirements) -> set[str]:
        """Domains of the schedulable existing nodes the pod could join."""
        # Pods alike in signature may differ in size; last binds are few and fill nodes nearly
        # full, so there room is asked per size.
        size = tuple(sorted(pod.requests.amounts.items())) if self.scope.placed_only else None
        memo_key = (self.signature(pod), key, extra, size)
        if (found := self._memos.existing_domains.get(memo_key)) is None:
            found = self._memos.existing_domains[memo_key] = {
                labels[key]
                for node, labels in self.cluster.nodes
                if node.schedulable
                and key in labels
                and self._has_room(pod, node)
                and self._fits_node(pod, extra, labels, node)
            }
        return found

    @staticmethod
    def _has_room(pod: Pod, node: ExistingNode) -> bool:
        """Room for the pod alone (batch pods may still take it first; the solver then retries)."""
        free = node.allocatable - node.requested
        pods = node.allocatable.get(PODS)
        return pod.requests.fits_in(free) and (not pods or node.pod_count + 1 <= pods)

    def _fits_node(
        self, pod: Pod, extra: Requirements, labels: Mapping[str, str], node: ExistingNode
    ) -> bool:
        if pod.tolerates(node.taints) is not None or not extra.matches(labels):
            return False
        return any(t.matches(labels) for t in pod_terms(pod))


def _running_repellers(cluster: Cluster) -> list[tuple[Counted, str, str]]:
    """Required anti-affinity of the running pods: (term, key, domain)."""
    repellers = []
    for node, labels in cluster.nodes:
        # Only required anti-affinity repels; most running pods have none (checked cheaply first).
        for pod in (p for p in node.pods if p.pod_anti_affinity):
            for rule in rules_of(pod, cluster.namespace_labels):
                if rule.kind == ANTI and rule.hard and rule.key in labels:
                    repellers.append((rule.term, rule.key, labels[rule.key]))
    return repellers


def settle_phases(
    pods: Sequence[Pod], phases: Mapping[str, int], namespace_labels: NamespaceLabels | None
) -> dict[str, int]:
    """The bind phases of the placed `pods`, with each pod whose required affinity, or hostname
    spread (the packer's, which counts every pod of the plan), selects pods of a later phase
    lifted to that phase: the pods it follows, or counts in the minimum of its spread, bind
    before it. (A spread on another key counts pods of later phases only where they would crowd
    it, and they must bind after it.)"""
    result = {p.key: phases[p.key] for p in pods if phases.get(p.key)}
    if not result:
        return result
    followers = _followers(pods, namespace_labels)
    selects: dict[tuple[int, tuple[str, Hashable]], bool] = {}
    changed = bool(followers)
    while changed:
        latest = _latest_phases(pods, result)
        changed = False
        for followed, keys in followers:
            need = max(
                (
                    phase
                    for alike, (phase, other) in latest.items()
                    if _follows(followed, alike, other, selects)
                ),
                default=0,
            )
            for key in keys:
                if need > result.get(key, 0):
                    result[key] = need
                    changed = True
    return result


def _followers(
    pods: Sequence[Pod], namespace_labels: NamespaceLabels | None
) -> list[tuple[tuple[Counted, ...], list[str]]]:
    """The pods that follow others (required affinity, hostname spread): what they follow and
    their keys, one entry per set of pods alike in namespace, labels and rules."""
    followers: dict[Hashable, tuple[tuple[Counted, ...], list[str]]] = {}
    for pod in pods:
        if not pod.pod_affinity and not any(
            s.hard and s.topology_key == wk.HOSTNAME for s in pod.topology_spread
        ):
            continue
        rules: Hashable = (pod.namespace, _labels_key(pod), pod.pod_affinity, pod.topology_spread)
        if rules not in followers:
            hostname = rules_of(pod, namespace_labels, hostname=True)
            terms = [r.term for r in hostname if r.hard and r.kind != ANTI]
            terms += [r.term for r in rules_of(pod, namespace_labels) if r.hard and r.kind == AFFINITY]
            followers[rules] = (tuple(terms), [])
        followers[rules][1].append(pod.key)
    return list(followers.values())


def _latest_phases(
    pods: Sequence[Pod], result: Mapping[str, int]
) -> dict[tuple[str, Hashable], tuple[int, Pod]]:
    """Pods alike in namespace and labels are selected alike: the latest phase of each such set."""
    latest: dict[tuple[str, Hashable], tuple[int, Pod]] = {}
    for pod in pods:
        if phase := result.get(pod.key, 0):
            alike = (pod.namespace, _labels_key(pod))
            if phase > latest.get(alike, (0, pod))[0]:
                latest[alike] = (phase, pod)
    return latest


def _follows(
    followed: Sequence[Counted],
    alike: tuple[str, Hashable],
    pod: Pod,
    memo: dict[tuple[int, tuple[str, Hashable]], bool],
) -> bool:
    """Whether one of the terms selects `pod`, and so every pod alike in namespace and labels."""
    for term in followed:
        if (hit := memo.get((id(term), alike))) is None:
            hit = memo[(id(term), alike)] = term.selects(pod)
        if hit:
            return True
    return False


def _labels_key(pod: Pod) -> Hashable:
    return tuple(sorted(pod.labels.items()))


def _in(key: str, values: Iterable[str]) -> Requirements:
    return Requirements.of({key: ValueSet(False, frozenset(values), allow_absent=False)})


def _not_in(key: str, values: Iterable[str]) -> Requirements:
    return Requirements.of({key: ValueSet(True, frozenset(values), allow_absent=True)})


def _absent(key: str) -> Requirements:
    return Requirements.of({key: ValueSet(False, frozenset(), allow_absent=True)})


def _failure(rules: Sequence[Rule], key: str, repelled: set[str]) -> str:
    hard = [r.describe() for r in rules if r.hard]
    if repelled and not hard:
        return f"pod anti-affinity of running pods on {key} leaves no domain"
    return f"{' and '.join(dict.fromkeys(hard)) or 'topology'} leaves no domain"
