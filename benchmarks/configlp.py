"""The configuration LP bound and a near-optimal integer plan, with HiGHS (scipy), for the benchmark.

A node of type t holds an integer pattern a (a_s pods of shape s that fit its allocatable
together). Every plan is a multiset of (type, pattern) nodes, so its cost is at least the optimum
of the configuration LP: min sum(price_t x_p) subject to sum_p a_p x_p >= count, x >= 0, over all
patterns. That optimum respects whole pods per node, which the fractional cover LP (bounds.py)
does not, and is found by column generation: the master LP over the patterns found so far gives
duals pi; for each type a bounded knapsack (a small MIP: max pi.a, R a <= allocatable, a <= count)
finds its best pattern; patterns with pi.a > price enter. Farley's argument makes every round a
valid bound, converged or not: with r = max_t K_t(pi) / price_t >= 1, master value / r is below
every plan (the same argument as lowerbound.pattern_bound, with exact knapsacks).

The integer master over the generated patterns is then solved as a MIP: a real plan (priced on the
same catalog view), so plan / LP brackets the optimum: karpy's plan can be judged against both.

Benchmark-only: scipy is a dev dependency, never imported by the product.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, linprog, milp

from benchmarks.catalogview import alloc_of, allowed_types, cheapest_price, groups, request_of
from extender.api.pod import Pod
from extender.scheduling.instancetypes import InstanceType

Vector = tuple[float, ...]
EPS = 1e-9
ROUNDS = 200


@dataclass
class Pool:
    """Pods that share no type with any other pool: shapes, and the types each shape may use."""

    shapes: list[Vector]
    counts: list[int]
    #: (type name, allocatable, price, indices of the shapes the type may hold)
    types: list[tuple[str, Vector, float, frozenset[int]]]


@dataclass(frozen=True)
class Result:
    bound: float
    lp: float
    integer: float
    converged: bool


def pools(pods: Sequence[Pod], catalog: Sequence[InstanceType], capacity_types: Sequence[str]) -> list[Pool]:
    """Group pods by the type sets they may use; groups whose sets overlap share a pool."""
    parts: list[tuple[set[str], dict[Vector, int], dict[str, InstanceType], dict[Vector, set[str]]]] = []
    for (arch, gpu), group in groups(pods).items():
        types = {t.name: t for t in allowed_types(catalog, arch=arch, gpu=gpu, capacity_types=capacity_types)}
        counts: dict[Vector, int] = {}
        for pod in group:
            counts[request_of(pod)] = counts.get(request_of(pod), 0) + 1
        allowed = {shape: set(types) for shape in counts}
        names = set(types)
        for part in [p for p in parts if p[0] & names]:
            parts.remove(part)
            names |= part[0]
            types.update(part[2])
            for shape, n in part[1].items():
                counts[shape] = counts.get(shape, 0) + n
                allowed[shape] = allowed.get(shape, set()) | part[3][shape]
        parts.append((names, counts, types, allowed))
    result = []
    for _, counts, types, allowed in parts:
        shapes = list(counts)
        entries = []
        for t in types.values():
            may = frozenset(i for i, s in enumerate(shapes) if t.name in allowed[s])
            alloc = alloc_of(t)
            may = frozenset(
                i for i in may if all(r <= a + EPS for r, a in zip(shapes[i], alloc, strict=True))
            )
            if may:
                entries.append((t.name, alloc, cheapest_price(t, capacity_types), may))
        result.append(Pool(shapes, [counts[s] for s in shapes], _undominated(entries)))
    return result


def _undominated(
    entries: list[tuple[str, Vector, float, frozenset[int]]],
) -> list[tuple[str, Vector, float, frozenset[int]]]:
    """Drop a type when another holds at least as much of everything, for at most its price."""
    kept: list[tuple[str, Vector, float, frozenset[int]]] = []
    for entry in sorted(entries, key=lambda e: (e[2], e[0])):
        if not any(
            k[2] <= entry[2] + EPS
            and k[3] >= entry[3]
            and all(a >= b - EPS for a, b in zip(k[1], entry[1], strict=True))
            for k in kept
        ):
            kept.append(entry)
    return kept


def _knapsack(
    pool: Pool, entry: tuple[str, Vector, float, frozenset[int]], duals: np.ndarray
) -> tuple[list[int], float]:
    """The type's best pattern at these duals, and an upper bound on any pattern's worth (HiGHS's
    dual bound, so the Farley ratio stays valid whatever gap the MIP closed)."""
    _, alloc, _, may = entry
    index = [i for i in sorted(may) if duals[i] > EPS]
    if not index:
        return [0] * len(pool.shapes), 0.0
    matrix = np.array([[pool.shapes[i][d] for i in index] for d in range(len(alloc))])
    upper = np.array([pool.counts[i] for i in index], dtype=float)
    found = milp(
        c=-duals[index],
        constraints=LinearConstraint(matrix, -np.inf, np.array(alloc) + 1e-6),
        integrality=np.ones(len(index)),
        bounds=Bounds(0, upper),
        options={"mip_rel_gap": 1e-9},
    )
    if found.x is None:
        raise RuntimeError(f"knapsack for {entry[0]} not solved: {found.message}")
    pattern = [0] * len(pool.shapes)
    for i, v in zip(index, found.x, strict=True):
        pattern[i] = round(v)
    return pattern, max(-float(found.mip_dual_bound), -float(found.fun))


def solve_pool(pool: Pool, rounds: int = ROUNDS) -> Result:
    n = len(pool.shapes)
    demand = np.array(pool.counts, dtype=float)
    columns: list[tuple[list[int], float]] = []
    # One single-shape pattern per (type, shape): the master is feasible from the start.
    for _, alloc, price, may in pool.types:
        for i in may:
            k = min(pool.counts[i], _fit(pool.shapes[i], alloc))
            if k:
                columns.append(([k if j == i else 0 for j in range(n)], price))
    best_bound, lp_value, converged = 0.0, 0.0, False
    for _ in range(rounds):
        a = np.array([c for c, _ in columns], dtype=float).T
        costs = np.array([p for _, p in columns])
        master = linprog(costs, A_ub=-a, b_ub=-demand, bounds=(0, None), method="highs")
        lp_value = master.fun
        duals = -master.ineqlin.marginals
        ratio, added = 1.0, 0
        for entry in pool.types:
            pattern, upper = _knapsack(pool, entry, duals)
            worth = float(np.dot(duals, pattern))
            ratio = max(ratio, upper / entry[2])
            if worth > entry[2] * (1 + 1e-7):
                columns.append((pattern, entry[2]))
                added += 1
        best_bound = max(best_bound, lp_value / ratio)
        if not added:
            converged = True
            break
    a = np.array([c for c, _ in columns], dtype=float).T
    costs = np.array([p for _, p in columns])
    integer = milp(
        c=costs,
        constraints=LinearConstraint(a, demand, np.inf),
        integrality=np.ones(len(columns)),
        bounds=Bounds(0, np.inf),
        options={"time_limit": 20.0, "mip_rel_gap": 1e-6},
    )
    return Result(
        best_bound, lp_value, float(integer.fun) if integer.x is not None else float("inf"), converged
    )


def _fit(request: Vector, alloc: Vector) -> int:
    return min((int((a + 1e-9) // r) for r, a in zip(request, alloc, strict=True) if r > 0), default=0)


def configuration_lp(
    pods: Sequence[Pod], catalog: Sequence[InstanceType], capacity_types: Sequence[str]
) -> Result:
    """Summed over independent pools (no type serves two of them, so their plans add up)."""
    results = [solve_pool(p) for p in pools(pods, catalog, capacity_types)]
    return Result(
        sum(r.bound for r in results),
        sum(r.lp for r in results),
        sum(r.integer for r in results),
        all(r.converged for r in results),
    )
