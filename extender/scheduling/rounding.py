"""Starts for the greedy from the configuration LP: its fractional plan over node patterns, rounded.

The greedy packer chooses one node at a time from what is still pending, so it never weighs the
batch as a whole; the configuration LP (lowerbound.configuration_lp, the one the bound solves)
does, and its optimum is a mix of node patterns that whole plans come close to. A start opens
floor(x) nodes of each pattern the LP uses x of; a second start also rounds up the patterns with
the largest fractional parts, in that order, until the pods run out. The packer opens each node
(`Packer.open_node`: requirements, room and hostname rules decide, the pattern is a hint), the
greedy places what is left, and the solver merges, searches and keeps the cheapest plan of all.

Only classes the LP models get a start: pods without hostname rules or host ports, on a
Provisioner without limits, at most lowerbound.SEARCHED_SHAPES classes per (Provisioner,
accelerator kinds); the rest are left to the greedy as before.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from extender.scheduling.candidates import Candidate, CandidateCache
from extender.scheduling.fill import Cursors, PodClass, ruled
from extender.scheduling.lowerbound import (
    SEARCHED_SHAPES,
    Allowance,
    PodShape,
    configuration_lp,
)
from extender.scheduling.packer import Packer

#: Nodes to open, in order: the type and the pods of each class it should hold.
Start = list[tuple[Candidate, list[tuple[PodClass, int]]]]
#: Branch-and-bound nodes per knapsack: patterns need not be proven optimal to be good starts, and
#: the exact knapsacks the bound uses cost seconds per batch (190 pods of 6 shapes: 8.5 s of a
#: 8.5 s solve with 4,000 nodes each; 0.36 s in all with 200, and as cheap a plan).
KNAPSACK_NODES = 200
#: LP multiplicities within this of an integer are that integer (the simplex's rounding noise).
EPS = 1e-6


def starts(
    cache: CandidateCache, classes: Sequence[PodClass], cursors: Cursors, limited: Sequence[str]
) -> list[Start]:
    """The rounded-down start and, when some pattern is fractional, the rounded-up one; [] when
    no group of `classes` is modelled. `limited`: Provisioners with limits (never modelled)."""
    groups: dict[tuple[int, frozenset[str]], list[PodClass]] = {}
    for c in classes:
        if cursors.left(c) and c.view is not None and c.reqs is not None and not ruled(c):
            groups.setdefault((id(c.view), c.gpus), []).append(c)
    down: Start = []
    fractions: list[tuple[float, Candidate, list[tuple[PodClass, int]]]] = []
    for members in groups.values():
        view = members[0].view
        assert view is not None
        if len(members) > SEARCHED_SHAPES or view.provisioner.name in limited:
            continue
        # A type's cheapest offering any class allows, as the bound prices it; the packer prices
        # the node it opens by its own requirements.
        cheapest: dict[str, Candidate] = {}
        shapes = []
        for c in members:
            assert c.reqs is not None
            usable = cache.usable(cache.lookup(view, c.reqs, c.gpus), c.request)
            for candidate in usable:
                name = candidate.entry.type.name
                if name not in cheapest or candidate.offering.price < cheapest[name].offering.price:
                    cheapest[name] = candidate
            names = frozenset(u.entry.type.name for u in usable)
            shapes.append(PodShape(c.request, cursors.left(c), names, 1.0))
        supplies = {name: (c.entry.alloc, c.offering.price) for name, c in cheapest.items()}
        for use in configuration_lp(shapes, supplies, Allowance(4000, 20_000, 200))[1]:
            counts = [(c, a) for c, a in zip(members, use.pattern, strict=True) if a]
            whole = math.floor(use.nodes + EPS)
            down += [(cheapest[use.type], counts)] * whole
            if use.nodes - whole > EPS:
                fractions.append((use.nodes - whole, cheapest[use.type], counts))
    if not down and not fractions:
        return []
    fractions.sort(key=lambda f: -f[0])
    up = down + [(candidate, counts) for _, candidate, counts in fractions]
    return [down, up] if fractions and down else [up]


def open_start(packer: Packer, start: Start) -> None:
    for candidate, counts in start:
        packer.open_node(candidate, counts)
