"""The packing passes of a round: heuristics that fill new nodes, each from its own copy of the
start (existing nodes already filled), each polished the same way (neighbours merged, then the
local search), and the one rule that picks the best packing.

A heuristic is a small type with `fill(packer, classes, leave_out)`; `portfolio` lists the ones a
round runs, so a new heuristic is a new type added there.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Protocol

from extender.api import labels as wk
from extender.api.pod import Pod
from extender.scheduling import improve, rounding
from extender.scheduling.candidates import Candidate, CandidateCache, CandidateSet, Vector, fit_count
from extender.scheduling.causes import Cause
from extender.scheduling.classes import SORT_KEYS, ordering
from extender.scheduling.fill import Cursors, Node, PodClass
from extender.scheduling.packer import MIX_TRIALS, LeaveOut, Match, Packer, State, alignment, overlap

Price = Callable[[Node], Candidate | None]


class Heuristic(Protocol):
    def fill(self, packer: Packer, classes: Sequence[PodClass], leave_out: LeaveOut) -> None:
        """Place the classes' pending pods on new nodes of `packer`."""


@dataclass(frozen=True)
class FirstFit:
    """Each new node the best of a few first-fit-decreasing trial fills (packer.py)."""

    def fill(self, packer: Packer, classes: Sequence[PodClass], leave_out: LeaveOut) -> None:
        packer.pack(classes, leave_out, mix_trials=0)


@dataclass(frozen=True)
class Balanced:
    """First-fit trials plus `trials` balanced ones per node, filled by how well a class `match`es
    the room left: cpu-heavy and memory-heavy pods share nodes sized for them together."""

    match: Match
    trials: int

    def fill(self, packer: Packer, classes: Sequence[PodClass], leave_out: LeaveOut) -> None:
        packer.pack(classes, leave_out, match=self.match, mix_trials=self.trials)


@dataclass(frozen=True)
class FromLP:
    """The configuration LP's rounded plan opened first (rounding.py), first-fit for the rest."""

    nodes: rounding.Start

    def fill(self, packer: Packer, classes: Sequence[PodClass], leave_out: LeaveOut) -> None:
        rounding.open_start(packer, self.nodes)
        packer.pack(classes, leave_out, mix_trials=0)


@dataclass(frozen=True)
class Rounded:
    """The FromLP passes, their starts solved only when a round gets to them (`run_all`): the
    configuration LP costs more than all the other passes of a small batch together."""

    cache: CandidateCache
    limited: Sequence[str]

    def heuristics(self, classes: Sequence[PodClass], cursors: Cursors) -> list[Heuristic]:
        """One FromLP per rounded start of the classes' pending pods (`cursors`: the round's start)."""
        return [FromLP(nodes) for nodes in rounding.starts(self.cache, classes, cursors, self.limited)]


def portfolio(
    classes: Sequence[PodClass],
    cursors: Cursors,
    cache: CandidateCache,
    limited: Sequence[str],
    budget: int | None,
) -> list[Heuristic | Rounded]:
    """First-fit alone, and unless the search is off (budget 0), the balanced fills where classes
    could mix and the LP's rounded starts. The order breaks ties between equal packings."""
    heuristics: list[Heuristic | Rounded] = [FirstFit()]
    if budget != 0 and mixes(classes, cursors):
        heuristics += [Balanced(m, n) for n in (MIX_TRIALS, 2 * MIX_TRIALS) for m in (alignment, overlap)]
    # The LP leaves limited Provisioners out (their headroom is charged node by node).
    if budget != 0 and any(
        cursors.left(c) and c.view and c.view.provisioner.name not in limited for c in classes
    ):
        heuristics.append(Rounded(cache, limited))
    return heuristics


@dataclass
class Packing:
    """What one pass made: the packer's state after it, and the pods it left out."""

    state: State
    left_out: list[tuple[Pod, Cause, str]] = field(default_factory=list)


def run(
    heuristic: Heuristic,
    base: Packer,
    start: State,
    classes: Sequence[PodClass],
    price: Price,
    budget: int | None,
) -> Packing:
    """One pass on its own packer at `start`: fill, merge neighbours, local search (`budget`
    repacks; None = improve.default_budget)."""
    packer = base.fork(start)
    left_out: list[tuple[Pod, Cause, str]] = []
    heuristic.fill(packer, classes, lambda pod, cause, reason: left_out.append((pod, cause, reason)))
    packer.merge_neighbours(price)
    if budget is None:
        budget = improve.default_budget(len(packer.nodes))
    if budget:
        improve.improve(packer, [ordering(name) for name in SORT_KEYS], price, budget)
    return Packing(packer.state(classes), left_out)


def run_all(
    heuristics: Sequence[Heuristic | Rounded],
    base: Packer,
    start: State,
    classes: Sequence[PodClass],
    price: Price,
    budget: int | None,
) -> list[Packing]:
    """Each heuristic's packing, in order, until the one `choose` would keep so far places every
    pending pod at the `floor`: a later packing would have to cost less to replace it, so none is
    run and `choose` keeps the same one."""
    least: float | None = math.inf  # not yet computed
    packings: list[Packing] = []
    chosen: Packing | None = None
    pending = list(reversed(heuristics))
    while pending:
        heuristic = pending.pop()
        if isinstance(heuristic, Rounded):
            base.restore(start)  # the LP reads the classes' hostname rules (a pass may relax them)
            pending += reversed(heuristic.heuristics(classes, start.cursors))
            continue
        packing = run(heuristic, base, start, classes, price, budget)
        packings.append(packing)
        if chosen is None or _better(packing, chosen, price):
            chosen = packing
        if not pending or chosen.left_out or not _one_per_group(chosen.state.nodes):
            continue  # nothing left to skip, or surely above the floor: a second node costs more
        if least == math.inf:
            least = floor(base.cache, classes, start.cursors)
        if least is not None and _cost(chosen, price) <= least + FLOOR_SLACK:
            break
    return packings


def _one_per_group(nodes: Sequence[Node]) -> bool:
    return len({(id(n.view), n.gpus) for n in nodes}) == len(nodes)


#: How far above the floor a packing's cost may be from rounding alone (sums of a few prices):
#: well under the 1e-9 a packing must save to be better (`_better`).
FLOOR_SLACK = 1e-11


def floor(cache: CandidateCache, classes: Sequence[PodClass], cursors: Cursors) -> float | None:
    """A price no packing of the classes' pending pods on new nodes costs less than: every node
    holds pods of one Provisioner view and accelerator kinds, so each such group costs at least
    what its dearest pod costs alone, on the cheapest type (any offering its class allows) that
    holds it. A node's requirements narrow its pods' (intersections), so its types and offerings
    are among theirs, except burstable types, which an instance-type list admits (candidates.py):
    None when a class lists instance types, or cannot be placed."""
    groups: dict[tuple[int, frozenset[str]], float] = {}
    for c in classes:
        if not cursors.left(c):
            continue
        if c.view is None or c.reqs is None or not c.reqs.get(wk.INSTANCE_TYPE).complement:
            return None
        found = cache.lookup(c.view, c.reqs, c.gpus)
        alone = found.remember(("alone", c.request), partial(_alone, found, c.request))
        key = (id(c.view), c.gpus)
        groups[key] = max(groups.get(key, 0.0), alone)
    least = sum(groups.values())
    return least if least < math.inf else None


def _alone(found: CandidateSet, request: Vector) -> float:
    """The cheapest price of a type in the set, estimated or not, that holds one pod of `request`."""
    return min(
        (c.offering.price for c in found.candidates if fit_count(request, c.entry.alloc)), default=math.inf
    )


def _cost(packing: Packing, price: Price) -> float:
    return sum(_price(price(n)) for n in packing.state.nodes)


def choose(packings: Sequence[Packing], price: Price) -> Packing:
    """The best packing: fewest pods left out, then cheapest, with more nodes only when that saves
    a real share of the cost (improve.pays_for_its_nodes, as the local search's repacks); the
    first of equals."""
    chosen = packings[0]
    for other in packings[1:]:
        if _better(other, chosen, price):
            chosen = other
    return chosen


def _better(packing: Packing, other: Packing, price: Price) -> bool:
    if len(packing.left_out) != len(other.left_out):
        return len(packing.left_out) < len(other.left_out)
    nodes, before_nodes = packing.state.nodes, other.state.nodes
    before = _cost(other, price)
    saving = before - _cost(packing, price)
    return saving > 1e-9 and improve.pays_for_its_nodes(len(nodes) - len(before_nodes), saving, before)


def _price(candidate: Candidate | None) -> float:
    return candidate.offering.price if candidate else 0.0


#: Balanced passes run while pods left for new nodes x classes is at most this: a balanced fill
#: looks at every class every few pods, so its work grows with both, where first-fit's grows with
#: the pods. Past it (5,000 pods of 20 shapes; 1,000 pods of hundreds of topology classes) the
#: first-fit pass alone keeps the batch fast; large batches of many shapes fill first-fit nodes
#: well anyway (5,000 pods of 20 shapes: no balanced pass was cheaper).
MIX_WORK = 40_000
#: Nor with more classes than this (a balanced fill rescans them all every few pods): batches of
#: many distinct pods (hundreds of label and topology variants) keep first-fit's speed.
MIX_CLASSES = 24


def mixes(classes: Sequence[PodClass], cursors: Cursors) -> bool:
    """Whether balanced passes are worth running: two classes with pods left could share a new
    node (else they add nothing), within MIX_CLASSES and MIX_WORK."""
    pending = [c for c in classes if cursors.left(c) and c.view is not None]
    if len(pending) > MIX_CLASSES or sum(map(cursors.left, pending)) * len(pending) > MIX_WORK:
        return False
    return any(a.view is b.view and a.gpus == b.gpus for a, b in itertools.pairwise(pending))
