"""Packing classes of identical pods: first-fit onto existing nodes, then one new node at a time.

A class is a run of pods with the same requests and constraints, so placing it on a node is one
arithmetic step (how many fit) rather than one step per pod; every fill asks that of one rule,
`Packer.can_take` (Karpenter's CanAdd). A pass's own `Cursors` (fill.py) say which pods are
pending. Existing nodes are filled first-fit in descending order. Each new node is then chosen by
trying its most promising instance types: every trial fills an empty node of that type
First-Fit-Descending from the pods still pending, and the type whose fill is worth most per dollar
wins, where a pod is worth the cheapest $/pod its class could get on nodes of its own
(`CandidateCache.pod_rate`). The solver later offers every type that holds the final contents,
cheapest first, which shrinks partly filled nodes. Last, neighbouring nodes are merged when one
node holding both is no dearer.

First-fit fills a node with the seed class first, so cpu-heavy and memory-heavy pods end on nodes
sized for each alone. A pass with a `match` adds balanced trials: types ranked by the price of the whole
pending mix in their proportions, filled a few pods at a time with the class that best matches
the room left; the solver runs first-fit alone and with each match and keeps the cheapest plan.
While every trial of a node would fill the same way again (counts set by the room, not by the
pods left; no hostname rules), the chosen node is repeated without the trials: large batches are
mostly such runs.
"""

from __future__ import annotations

import copy
import math
import operator
from collections import Counter
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field

from extender.api.pod import Pod
from extender.scheduling import attach, limits, minvalues, shared_claims
from extender.scheduling.candidates import Candidate, CandidateCache, Vector, fit_count
from extender.scheduling.causes import Cause
from extender.scheduling.fill import Cursors, Node, PodClass, ruled
from extender.scheduling.memo import MISSING, Memo
from extender.scheduling.plan import ExistingNode
from extender.scheduling.requirements import Requirements
from extender.scheduling.topology import HostConstraints

#: Instance types tried for each new node; the ranking by the seed class's own $/pod puts the
#: winner among the first few, and each trial costs a pass over the pending classes.
TRIALS = 6
#: Types tried per new node with a balanced fill (`_balanced`, in the solver's balanced passes),
#: ranked by what the pending pods cost bought in the type's proportions; the solver also runs
#: passes with twice as many (which type wins early shifts what is left, so neither always wins).
MIX_TRIALS = 4
_SERIAL = operator.attrgetter("serial")
#: Trial fills a round remembers (`Packer._remembered`); cleared when full.
MAX_FILLS = 4096
#: How many earlier nodes a node is offered to when merging.
MERGE_WINDOW = 4
NO_ROOM = "no instance type has room for the pod's requests"
_Merged = Requirements | None
#: How well a pod's request suits a node's room: (request, capacity, used) -> higher is better.
Match = Callable[[Vector, Vector, Vector], float]
UNMET_TOPOLOGY = "pod (anti-)affinity, topology spread on kubernetes.io/hostname or host ports cannot be met"
#: Where a pass reports a pod it leaves out.
LeaveOut = Callable[[Pod, Cause, str], None]


#: What `Packer.can_take` finds: (how many pods, the node's requirements with them, the node's
#: room for the class after minValues, which a trial records); requirements None when the class
#: may not join the node at all. A plain tuple: every fill asks it for every pending class.
Take = tuple[int, Requirements | None, int]
NO_TAKE: Take = (0, None, 0)


@dataclass
class _Trial:
    candidate: Candidate
    node: Node
    value: float
    #: class -> the fewest pods it must have left for the same fill; None when a pod of a class
    #: considered carries a hostname rule or host ports (others' placement counts).
    needs: dict[PodClass, int] | None = field(default_factory=dict)

    @property
    def score(self) -> tuple[float, float]:
        # Worth per dollar first; on a tie the fuller node, so fewer nodes carry the same pods.
        return (self.value / self.candidate.offering.price, self.value)

    def again(self, cursors: Cursors, placed: Mapping[PodClass, int] | None = None) -> bool:
        """Whether filling the same type from the pending pods would give the same node: every
        count was set by the room, not by how many pods were left, and still is (once `placed`,
        class -> pods, are taken too)."""
        taken = placed or {}
        return self.needs is not None and all(
            cursors.left(c) - taken.get(c, 0) >= n for c, n in self.needs.items()
        )

    def need(self, pod_class: PodClass, left: int | None) -> None:
        """Record that the fill holds only while `pod_class` has at least `left` pods pending; None:
        it took every pod left, so no later fill is the same."""
        if left is None:
            self.needs = None
        elif self.needs is not None:
            self.needs[pod_class] = max(self.needs.get(pod_class, 0), left)

    def replay(self) -> _Trial:
        """The same fill on a new node."""
        old = self.node
        node = Node(capacity=old.capacity, used=tuple(0.0 for _ in old.used), view=old.view, reqs=old.reqs)
        node.gpus, node.type_name = old.gpus, old.type_name
        for pod_class, count in old.entries:
            node.add(pod_class, count)
        return _Trial(self.candidate, node, self.value, self.needs)


def alignment(request: Vector, capacity: Vector, used: Vector) -> float:
    """Cosine of the angle between a pod's request and the node's room, both as shares of the
    node: 1 when the pod uses the resources in the proportions the node has them left."""
    dot = size = room = 0.0
    for r, c, u in zip(request, capacity, used, strict=True):
        if c > 0:
            a, b = r / c, (c - u) / c
            dot, size, room = dot + a * b, size + a * a, room + b * b
    return dot / math.sqrt(size * room) if size > 0 and room > 0 else 0.0


def overlap(request: Vector, capacity: Vector, used: Vector) -> float:
    """Dot product of a pod's request and the node's room, both as shares of the node: like
    `alignment`, but larger pods first among those that suit the room."""
    return sum(r * (c - u) / (c * c) for r, c, u in zip(request, capacity, used, strict=True) if c > 0)


#: Relative slack on `_beaten`'s ceiling, far above the rounding of a fill's sums.
CEILING_SLACK = 1e-6


def _group(seed: PodClass, active: Sequence[PodClass]) -> list[PodClass]:
    """The pending classes that may share a new node with the seed: its Provisioner view and
    accelerator kinds (`can_take` checks them too)."""
    return [c for c in active if c.view is seed.view and c.gpus == seed.gpus]


def _beaten(
    seed: PodClass, active: Sequence[PodClass], cursors: Cursors, score: float
) -> Callable[[Candidate], bool]:
    """Whether a fill of a candidate's type, from the pending classes the seed's node may take,
    surely scores below `score` (worth per dollar): its worth is at most all their pods', and at
    most the type's allocatable of any resource they all request at the most worth per unit."""
    group = _group(seed, active)
    worth = sum(cursors.left(c) * c.rate for c in group)
    per_unit = [
        (d, max(c.rate / c.request[d] for c in group))
        for d in range(len(seed.request))
        if all(c.request[d] > 0 for c in group)
    ]

    def beaten(candidate: Candidate) -> bool:
        alloc = candidate.entry.alloc
        most = min([worth, *(rate * (alloc[d] + 1e-9) for d, rate in per_unit)])
        return most * (1 + CEILING_SLACK) < score * candidate.offering.price

    return beaten


class Packer:
    def __init__(
        self,
        cache: CandidateCache,
        min_request: Vector,
        headroom: limits.Headroom | None = None,
        *,
        trials: int = TRIALS,
    ) -> None:
        self.cache = cache
        self.min_request = min_request
        #: Instance types tried per new node (local search widens it, improve.py).
        self.trials = trials
        self.nodes: list[Node] = []
        self.existing: list[Node] = []
        self.placed_by_term: Counter[int] = Counter()
        #: Provisioner -> cpu/memory its limits still allow; new nodes are only of types that fit.
        self.headroom = headroom or {}
        self.relaxed: list[str] = []
        #: This pass's cursors: a fork starts from its `State`'s.
        self.cursors = Cursors()
        # By the requirements' serials (memo.py): the same few objects recur.
        #: (node's, class's requirements) -> the node's with the class's (`_merge`).
        self._intersections: Memo[tuple[int, int], _Merged] = Memo()
        #: Requirements -> the names of the types they allow (`_names_of`).
        self._names: Memo[int, frozenset[str]] = Memo()
        self._mix_trials = MIX_TRIALS
        #: Trial fills by pending state (`_remembered`), shared by a round's passes; None unless
        #: `share_fills` (one pass, or the local search's repacks of fresh classes, never ask twice).
        self._fills: Memo[Hashable, _Trial] | None = None

    def add_existing(
        self,
        node: ExistingNode,
        dims: Sequence[str],
        matching: Callable[[Pod], tuple[int, ...]],
        repels: Callable[[Pod], tuple[int, ...]],
        *,
        count_pods: bool = True,
    ) -> None:
        """Count the node's pods for hostname-level rules (`count_pods`: any term is in play); a
        schedulable node also takes pods."""
        counts: Counter[int] = Counter()
        anti: set[int] = set()
        for pod in node.pods if count_pods else ():
            counts.update(matching(pod))
            anti.update(repels(pod))
        self.placed_by_term.update(counts)
        if not node.schedulable:
            return
        free = tuple(_existing_room(node, d) for d in dims)
        used = tuple(0.0 if d == "pods" or attach.driver_of(d) else node.requested.get(d) for d in dims)
        self.existing.append(
            Node(
                capacity=free,
                used=used,
                existing=node,
                term_counts=counts,
                anti=anti,
                ports=[port for pod in node.pods for port in pod.host_ports],
                # Only a limit makes a shared claim's charge count (other drivers are unlimited).
                claims=shared_claims.held(node.pods) if node.volume_limits else set(),
            )
        )

    def can_take(self, node: Node, pod_class: PodClass, want: int, bound: bool | None = None) -> Take:
        """How many of `want` more pods of the class the node takes: the one placement rule of every
        fill (Karpenter's CanAdd). An existing node: the pods tolerate its taints and match its
        labels; a new node: the class shares its Provisioner view and GPUs, and their requirements
        agree and still allow its type. Then the room (shared claims charged once, the NodePool's
        minValues kept) and the hostname rules and host ports cap the count (`bound`: whether any
        bind the class, `ruled`; computed when None)."""
        if node.existing is not None:
            if pod_class.pods[0].tolerates(node.existing.taints) is not None:
                return NO_TAKE
            if not pod_class.pod_reqs.matches(node.existing.labels):
                return NO_TAKE
            room = node.room_for(pod_class)
            return min(self.topology_cap(node, pod_class, want), room), node.reqs, room
        if pod_class.view is not node.view or pod_class.gpus != node.gpus or pod_class.reqs is None:
            return NO_TAKE
        assert node.reqs is not None and node.view is not None
        # The memo read directly, not through `_merge`: every fill asks for every pending class.
        key = (node.reqs.serial, pod_class.reqs.serial)
        merged = self._intersections.found.get(key, MISSING)
        if merged is MISSING:
            merged = self._intersections.get(key, _merged, node, pod_class.reqs)
        if merged is None:
            return NO_TAKE
        # New requirements may rule the node's type out.
        recheck = merged is not node.reqs or not node.type_allowed
        if recheck and node.type_name not in self._names.get(merged.serial, self._names_of, node, merged):
            return NO_TAKE
        room = node.room_for(pod_class)
        if node.view.min_values and room:
            room = self._min_values_room(node, pod_class, merged, min(room, want))
        if ruled(pod_class) if bound is None else bound:
            return min(self.topology_cap(node, pod_class, want), room), merged, room
        return min(want, room), merged, room

    def topology_cap(self, node: Node, pod_class: PodClass, want: int) -> int:
        cap = want
        host = pod_class.host
        for term in host.anti:
            if node.term_counts[term]:
                return 0
            if term in pod_class.matches:
                cap = min(cap, 1)
        if node.anti and any(term in node.anti for term in pod_class.matches):
            return 0
        for term, skew in host.spread:
            # A pod outside its own selector adds nothing, but the node must already be within skew.
            own = 1 if term in pod_class.matches else 0
            if node.term_counts[term] + own > skew:
                return 0
            if own:
                cap = min(cap, skew - node.term_counts[term])
        for term in host.affinity:
            if node.term_counts[term]:
                continue
            if self.placed_by_term[term] or term not in pod_class.matches:
                return 0  # the pods to follow are elsewhere, or there are none and it is not their first
        for term in pod_class.matches:
            if term in node.spread_caps:
                cap = min(cap, node.spread_caps[term] - node.term_counts[term])
        if pod_class.ports:
            if any(p.conflicts(q) for p in pod_class.ports for q in node.ports):
                return 0
            # A new node also runs the DaemonSet pods that land on it, with their host ports.
            daemons = node.view.daemon_ports if node.existing is None and node.view is not None else ()
            if any(p.conflicts(q) for p in pod_class.ports for q in daemons):
                return 0
            # Pods of one class ask for the same ports: one per node.
            cap = min(cap, 1)
        return max(cap, 0)

    def merge_requirements(self, node: Node, class_reqs: Requirements) -> Requirements | None:
        """The node's requirements with a class's added, or None when they conflict (memoised)."""
        return self._merge(node, class_reqs)

    def _merge(self, node: Node, class_reqs: Requirements) -> Requirements | None:
        assert node.reqs is not None and node.view is not None
        return self._intersections.get((node.reqs.serial, class_reqs.serial), _merged, node, class_reqs)

    def _names_of(self, node: Node, reqs: Requirements) -> frozenset[str]:
        """The names of the types `reqs` allow on the node's Provisioner view (`_names`)."""
        assert node.view is not None
        return self.cache.lookup(node.view, reqs, node.gpus).names

    def _min_values_room(self, node: Node, pod_class: PodClass, merged: Requirements, most: int) -> int:
        """The most of `most` pods of the class the node takes while the types holding it all still
        meet its NodePool's minValues within the launch's options (minvalues.py); fewer pods leave
        more types, so the largest such count is found by bisection."""
        assert node.view is not None
        view, limit = node.view, self.cache.max_options
        found = self.cache.lookup(view, merged, node.gpus)

        def meets(count: int) -> bool:
            return bool(
                minvalues.options(found, node.after(pod_class, count), view.min_values, merged, limit)
            )

        if meets(most):
            return most
        low, high = 0, most  # meets(high) is false; meets(low) is assumed (0 adds nothing)
        while high - low > 1:
            middle = (low + high) // 2
            if meets(middle):
                low = middle
            else:
                high = middle
        return low

    def min_values_unmet(self, pod_class: PodClass) -> list[str]:
        """The minValues keys one pod of the class misses alone on a new node; [] when it meets them."""
        view, reqs = pod_class.view, pod_class.reqs
        if view is None or reqs is None or not view.min_values:
            return []
        found = self.cache.lookup(view, reqs, pod_class.gpus)
        if minvalues.options(found, pod_class.request, view.min_values, reqs, self.cache.max_options):
            return []
        holding = [c.entry.type for c in found.candidates if fit_count(pod_class.request, c.entry.alloc)]
        return minvalues.unmet(holding, view.min_values, reqs) or [k for k, _ in view.min_values]

    def _commit(self, node: Node, pod_class: PodClass, count: int) -> None:
        node.pods.extend(self.cursors.take(pod_class, count))
        for term in pod_class.matches:
            self.placed_by_term[term] += count

    # Existing nodes: first fit, class by class.
    def fill_existing(self, pod_class: PodClass) -> None:
        for node in self.existing:
            if not (left := self.cursors.left(pod_class)):
                return
            count = self.can_take(node, pod_class, left)[0]
            if count > 0:
                node.add(pod_class, count)
                self._commit(node, pod_class, count)

    # New nodes: one at a time, each the best of a few trial fills.
    def pack(
        self,
        classes: Sequence[PodClass],
        unschedulable: LeaveOut,
        *,
        match: Match | None = None,
        mix_trials: int = MIX_TRIALS,
    ) -> None:
        """Place the classes' pending pods on new nodes; `match` adds `mix_trials` balanced trials
        per node, filled by it."""
        cursors = self.cursors
        active = [c for c in classes if cursors.left(c)]
        for pod_class in active:
            if pod_class.view is None or pod_class.reqs is None:
                for pod in cursors.take(pod_class, cursors.left(pod_class)):
                    unschedulable(pod, Cause.NO_PROVISIONER, pod_class.reason)
            else:
                found = self.cache.lookup(pod_class.view, pod_class.reqs, pod_class.gpus)
                pod_class.rate = self.cache.pod_rate(found, pod_class.request)
        self._mix_trials = mix_trials
        self._greedy(active, unschedulable, match)

    def open_node(self, candidate: Candidate, counts: Sequence[tuple[PodClass, int]]) -> bool:
        """Open a new node of `candidate`'s type holding up to `counts` pending pods of each class (a
        pattern from rounding.py, a hint): the class's requirements must agree with the node's and
        allow the type, and room and hostname rules cap the count, as in a trial fill. The node
        is committed unless it would hold no pod; returns whether it was."""
        seed = counts[0][0] if counts else None
        if (
            seed is None
            or seed.view is None
            or seed.reqs is None
            or seed.view.provisioner.name in self.headroom
        ):
            return False  # limits are charged node by node in the greedy
        node = _empty(candidate, seed)
        # The pattern's type need not be one its first class's requirements allow.
        node.type_allowed = False
        for pod_class, want in counts:
            count, merged, _ = self.can_take(node, pod_class, min(want, self.cursors.left(pod_class)))
            if count > 0:
                node.reqs, node.type_allowed = merged, True
                node.add(pod_class, count)
                self._commit(node, pod_class, count)
        if not node.entries:
            return False
        self.nodes.append(node)
        return True

    def state(self, active: Sequence[PodClass]) -> State:
        """What packing, merging and local search change, to pack the same classes again."""
        return State(
            self.cursors.copy(),
            [(c, c.host) for c in active],
            list(self.nodes),
            Counter(self.placed_by_term),
            dict(self.headroom),
            list(self.relaxed),
        )

    def fork(self, start: State) -> Packer:
        """A packer at `start` for one pass: its own new nodes, term counts, headroom and notes; the
        memos (pure, keyed by the objects they keep) are shared. Its cursors are `start`'s."""
        other = copy.copy(self)
        other.restore(start)
        return other

    def restore(self, state: State) -> None:
        self.cursors = state.cursors.copy()
        for pod_class, host in state.hosts:
            pod_class.host = host
        self.nodes, self.placed_by_term = list(state.nodes), Counter(state.placed_by_term)
        self.headroom, self.relaxed = dict(state.headroom), list(state.relaxed)

    def _greedy(self, active: list[PodClass], unschedulable: LeaveOut, match: Match | None) -> None:
        last: tuple[PodClass, list[_Trial]] | None = None
        cursors = self.cursors
        while active := [c for c in active if cursors.left(c)]:
            seed = active[0]
            best: _Trial | None
            if last is not None and last[0] is seed and all(t.again(cursors) for t in last[1]):
                # Every trial would fill its node as before: repeat the choice without the trials
                # (the balanced trials' types are not ranked again for the smaller remainder).
                trials = last[1]
                best = max(trials, key=lambda t: t.score).replay()
            else:
                ranking = self._ranking(seed)
                pending = self._pending(active)
                trials = [self._remembered(c, seed, active, None, pending) for c in ranking]
                best = max((t for t in trials if t.node.entries), key=lambda t: t.score, default=None)
                if best is not None and match is not None:
                    ranked, firsts = self._mix_ranking(seed, active), trials
                    # A balanced fill that cannot score above the best first-fit one cannot win:
                    # skip it, unless the next node may repeat this one (`again` reads every trial).
                    beaten = _beaten(seed, active, cursors, best.score[0])
                    mixes = [
                        self._remembered(c, seed, active, match, pending) for c in ranked if not beaten(c)
                    ]
                    trials = [t for t in [*firsts, *mixes] if t.node.entries]
                    best = max(trials, key=lambda t: t.score)
                    if len(mixes) < len(ranked) and self._may_repeat(seed, trials, best):
                        mixes = [self._remembered(c, seed, active, match, pending) for c in ranked]
                        trials = [t for t in [*firsts, *mixes] if t.node.entries]
                # Trials are remembered for the round's other passes: commit a copy.
                best = best.replay() if best is not None else None
            assert seed.view is not None
            if best is not None and seed.view.provisioner.name not in self.headroom:
                last = (seed, [t for t in trials if t.node.entries])
            else:
                last = None
            if best is None:
                if seed.host.soft:
                    self.relax(seed)
                    continue
                if not ranking and self._ranking(seed, limited=False):
                    cause, reason = Cause.LIMITS, self.limit_reason(seed)
                elif unmet := self.min_values_unmet(seed):
                    cause, reason = Cause.NO_ROOM, minvalues.reason(unmet)
                elif any(t.node.room_for(seed) for t in trials):
                    cause, reason = Cause.HOST_RULES, UNMET_TOPOLOGY
                else:
                    cause, reason = Cause.NO_ROOM, NO_ROOM
                for pod in cursors.take(seed, cursors.left(seed)):
                    unschedulable(pod, cause, reason)
                continue
            node = best.node
            for pod_class, count in node.entries:
                self._commit(node, pod_class, count)
            self.nodes.append(node)
            name = seed.view.provisioner.name
            if name in self.headroom:
                node.charged = self.headroom[name].charge(best.candidate.entry.type)
                self.headroom[name] = self.headroom[name] - node.charged

    def _may_repeat(self, seed: PodClass, trials: Sequence[_Trial], best: _Trial) -> bool:
        """Whether, once `best` is committed, the next node may repeat it without trials: the seed
        still has pods left and every trial would fill as before (the start of `_greedy`)."""
        assert seed.view is not None
        if seed.view.provisioner.name in self.headroom:
            return False
        placed: Counter[PodClass] = Counter()
        for pod_class, count in best.node.entries:
            placed[pod_class] += count
        cursors = self.cursors
        return cursors.left(seed) > placed[seed] and all(t.again(cursors, placed) for t in trials)

    def relax(self, pod_class: PodClass) -> None:
        """Preferences were treated as required; the pods cannot have them all: drop them."""
        self.relaxed.append(
            f"Relaxed preferred kubernetes.io/hostname rules of {self.cursors.left(pod_class)} pod(s)"
            f" like {self.cursors.pending(pod_class)[0].key}"
        )
        pod_class.host = pod_class.hard_host

    def refill_relaxed(self, pod_class: PodClass) -> None:
        """Relax the class's hostname preferences and fill existing nodes again: the caps its
        preferred spread set on them go, those of required spreads stay. Noted if it placed any."""
        self.relax(pod_class)
        for node in self.existing:
            if any(c is pod_class for c, _ in node.entries):
                node.spread_caps = {}
                for placed, _ in node.entries:
                    for term, skew in placed.host.spread:
                        node.spread_caps[term] = min(skew, node.spread_caps.get(term, skew))
        left = self.cursors.left(pod_class)
        self.fill_existing(pod_class)
        if self.cursors.left(pod_class) == left:
            self.relaxed.pop()  # it placed none: nothing to report

    def limit_reason(self, seed: PodClass) -> str:
        assert seed.view is not None
        name = seed.view.provisioner.name
        return limits.exhausted(name, self.headroom.get(name))

    def _within_limits(self, seed: PodClass, candidate: Candidate) -> bool:
        assert seed.view is not None
        left = self.headroom.get(seed.view.provisioner.name)
        return left is None or left.allows(candidate.entry.type)

    def _ranking(self, seed: PodClass, *, limited: bool = True) -> list[Candidate]:
        """The seed's types by its own $/pod (larger first on ties), at most `trials`, within limits."""
        assert seed.view is not None and seed.reqs is not None
        found = self.cache.lookup(seed.view, seed.reqs, seed.gpus)

        def rank() -> list[Candidate]:
            rated = []
            for c, count in zip(*self.cache.counted(found, seed.request), strict=True):
                rated.append((c.offering.price / count, -c.offering.price, c))
            rated.sort(key=lambda r: (r[0], r[1]))
            return [c for _, _, c in rated]

        ranked = found.remember(("ranking", seed.request), rank)
        if not limited or seed.view.provisioner.name not in self.headroom:
            return ranked[: self.trials]
        result = []
        for candidate in ranked:
            if self._within_limits(seed, candidate):
                result.append(candidate)
                if len(result) == self.trials:
                    break
        return result

    def share_fills(self) -> None:
        """Remember trial fills for the passes forked from this packer (`_remembered`)."""
        self._fills = Memo(MAX_FILLS)

    def _remembered(
        self,
        candidate: Candidate,
        seed: PodClass,
        active: Sequence[PodClass],
        match: Match | None,
        pending: Hashable,
    ) -> _Trial:
        """`_trial` (match None) or `_balanced`, once per pending state of the round: the passes of a
        round start alike and often stay alike, so they ask the same fills. A fill reads the type
        and what `_pending` names of the pending classes."""
        if self._fills is None:
            return self._fill(candidate, seed, active, match)
        # Never committed itself (`_greedy` commits a replay).
        key = (candidate.serial, match, seed.serial, pending)
        return self._fills.get(key, self._fill, candidate, seed, active, match)

    def _pending(self, active: Sequence[PodClass]) -> Hashable:
        """What a fill reads of the pending classes: which they are, their cursors, whether their
        preferences were dropped and, for pod affinity, whether a term has pods yet. The same for
        every type a node tries: asked once per node."""
        if self._fills is None:
            return None
        return (
            tuple(map(_SERIAL, active)),
            self.cursors.positions(active),
            tuple([c.host is c.hard_host for c in active]),
            tuple([bool(self.placed_by_term[t]) for c in active for t in c.host.affinity]),
        )

    def _fill(
        self, candidate: Candidate, seed: PodClass, active: Sequence[PodClass], match: Match | None
    ) -> _Trial:
        return (
            self._trial(candidate, seed, active)
            if match is None
            else self._balanced(candidate, seed, active, match)
        )

    def _trial(self, candidate: Candidate, seed: PodClass, active: Sequence[PodClass]) -> _Trial:
        """Fill an empty node of `candidate`'s type FFD from the pending classes, without committing."""
        node = _empty(candidate, seed)
        trial = _Trial(candidate, node, 0.0)
        cursors = self.cursors
        # Not `_group`: a list per trial costs more than `can_take` turning the others away.
        for pod_class in active:
            bound = ruled(pod_class)
            left = cursors.left(pod_class)
            count, merged, room = self.can_take(node, pod_class, left, bound)
            if bound and merged is not None:
                trial.needs = None  # others' placement counts: the fill is not repeated
            if count <= 0:
                continue
            # Cut by the room, the same count is found while more than that is left.
            trial.need(pod_class, count + 1 if count == room < left else None)
            node.reqs = merged
            node.add(pod_class, count)
            trial.value += count * pod_class.rate
            if not node.room(self.min_request):
                break
        return trial

    def _mix_ranking(self, seed: PodClass, active: Sequence[PodClass]) -> list[Candidate]:
        """The seed's usable types by the price of the pending pods' total request bought in whole
        multiples of the type (per unit of that total), cheapest first, at most `mix_trials` (pack),
        within limits.
        """
        assert seed.view is not None and seed.reqs is not None
        total = [0.0] * len(seed.request)
        for pod_class in _group(seed, active):
            for d, r in enumerate(pod_class.request):
                total[d] += self.cursors.left(pod_class) * r
        found = self.cache.lookup(seed.view, seed.reqs, seed.gpus)

        def rank() -> list[Candidate]:
            # share = min over the requested dimensions of alloc / total, divided as before (a
            # reciprocal would round differently), picked and divided in C.
            dims = [d for d, t in enumerate(total) if t > 0]
            if not dims:
                return []
            pick = operator.itemgetter(*dims) if len(dims) > 1 else lambda a: (a[dims[0]],)
            totals = tuple(total[d] for d in dims)
            rated = []
            for c in self.cache.frontier(found, seed.request):
                share = min(map(operator.truediv, pick(c.entry.alloc), totals))
                if share > 0:
                    rated.append((c.offering.price / share, c.entry.type.name, c))
            rated.sort(key=lambda r: (r[0], r[1]))
            return [c for _, _, c in rated]

        # Every pass of a round ranks the same totals first: ranked once, limits read per pass.
        result: list[Candidate] = []
        for candidate in found.remember(("mix", seed.request, tuple(total)), rank):
            if len(result) == self._mix_trials:
                break
            if self._within_limits(seed, candidate):
                result.append(candidate)
        return result

    def _balanced(
        self,
        candidate: Candidate,
        seed: PodClass,
        active: Sequence[PodClass],
        match: Match,
    ) -> _Trial:
        """Fill an empty node of `candidate`'s type with the seed and the pending classes, at each step
        adding half of what fits of the class whose request best `match`es the room left
        (`alignment`, `overlap`): unlike first-fit, cpu-heavy
        and memory-heavy pods share a node whose proportions suit them together."""
        capacity = candidate.entry.alloc
        node = _empty(candidate, seed)
        taken: dict[PodClass, int] = {}
        # (class, whether hostname rules or ports bind it).
        pending = [(c, ruled(c)) for c in _group(seed, active)]
        trial = _Trial(candidate, node, 0.0)
        cursors = self.cursors
        while True:
            best: tuple[float, PodClass, Take] | None = None
            for pod_class, bound in pending:
                want = cursors.left(pod_class) - taken.get(pod_class, 0)
                if want <= 0:
                    continue
                take = self.can_take(node, pod_class, want, bound)
                if bound and take[1] is not None:
                    trial.needs = None  # others' placement counts: the fill is not repeated
                if take[0] <= 0:
                    continue
                fit = match(pod_class.request, capacity, node.used)
                if best is None or fit > best[0]:
                    best = (fit, pod_class, take)
            if best is None:
                break
            _, pod_class, take = best
            count, merged, room = take
            before = taken.get(pod_class, 0)
            # Cut by the room, the same count is found while more than that is left.
            trial.need(pod_class, before + count + 1 if count == room else None)
            count = max(1, count // 2)
            node.reqs = merged
            node.add(pod_class, count)
            taken[pod_class] = before + count
            trial.value += count * pod_class.rate
        return trial

    def merge_neighbours(self, price: Callable[[Node], Candidate | None]) -> None:
        """Fold a node into one of the few before it when one node holding both costs no more."""
        kept: list[Node] = []
        for node in self.nodes:
            for other in kept[-MERGE_WINDOW:]:
                if self._absorb(other, node, price):
                    break
            else:
                kept.append(node)
        self.nodes = kept

    def _absorb(self, target: Node, node: Node, price: Callable[[Node], Candidate | None]) -> bool:
        if target.view is not node.view or target.gpus != node.gpus:
            return False
        assert node.reqs is not None
        merged = self._merge(target, node.reqs)
        if merged is None:
            return False
        trial = Node(capacity=target.used, used=target.used, view=target.view, reqs=merged, gpus=target.gpus)
        trial.term_counts, trial.anti = Counter(target.term_counts), set(target.anti)
        trial.ports, trial.spread_caps = list(target.ports), dict(target.spread_caps)
        trial.claims = set(target.claims)
        trial.capacity = tuple(float("inf") for _ in target.used)
        for pod_class, count in node.entries:
            if self.topology_cap(trial, pod_class, count) < count:
                return False
            trial.add(pod_class, count)
        alone = price(target), price(node)
        joint, apart = price(trial), sum(_cost(c) for c in alone)
        if joint is None or joint.offering.price > apart + 1e-9:
            return False
        if joint.estimated and not any(c is not None and c.estimated for c in alone):
            return False  # an estimate may not undercut real prices
        assert target.view is not None
        name = target.view.provisioner.name
        if name in self.headroom:
            # The joint node must fit what the two nodes took from the limits plus what is left.
            room = self.headroom[name] + target.charged + node.charged
            charged = room.charge(joint.entry.type)
            if not room.holds(charged):
                return False
            self.headroom[name] = room - charged
            target.charged = charged
        target.reqs, target.used = merged, trial.used
        target.entries.extend(node.entries)
        target.term_counts, target.anti, target.ports = trial.term_counts, trial.anti, trial.ports
        target.spread_caps, target.claims = trial.spread_caps, trial.claims
        target.pods.extend(node.pods)
        return True


def _merged(node: Node, class_reqs: Requirements) -> Requirements | None:
    """The node's requirements with a class's added, None when they conflict or leave a key of the
    node's Provisioner without a value; the node's own object when the class adds nothing."""
    assert node.reqs is not None and node.view is not None
    merged = node.reqs.intersect(class_reqs)
    if merged is not None and merged.conflict(node.view.keys):
        return None
    if merged == node.reqs:
        return node.reqs  # unchanged: callers test identity
    return merged


@dataclass
class State:
    """A packer's new nodes and what placing pods changed (see `Packer.state`)."""

    cursors: Cursors
    #: Each class's hostname rules (`Packer.relax` drops its preferences).
    hosts: list[tuple[PodClass, HostConstraints]]
    nodes: list[Node]
    placed_by_term: Counter[int]
    headroom: limits.Headroom
    relaxed: list[str]


def _existing_room(node: ExistingNode, dim: str) -> float:
    """What the node offers in a dimension: pods and attachable volumes net of those in use."""
    if dim == "pods":
        return node.allocatable.get(dim) - node.pod_count
    if driver := attach.driver_of(dim):
        return float(node.volume_room(driver))
    return node.allocatable.get(dim)


def _cost(candidate: Candidate | None) -> float:
    return candidate.offering.price if candidate else 0.0


def _empty(candidate: Candidate, seed: PodClass) -> Node:
    """A new node of `candidate`'s type, with `seed`'s Provisioner view and requirements."""
    return Node(
        capacity=candidate.entry.alloc,
        used=tuple(0.0 for _ in seed.request),
        view=seed.view,
        reqs=seed.reqs,
        gpus=seed.gpus,
        type_name=candidate.entry.type.name,
    )
