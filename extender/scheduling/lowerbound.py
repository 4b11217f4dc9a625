"""Lower bounds on $/h for a batch; the solver reports the larger as plan cost / lower bound.

- `cover_cost`: the LP relaxation of covering the batch's total requests with offerings,
  min sum(price_t * x_t) subject to sum(x_t * allocatable_t) >= demand, x >= 0. With m resource
  dimensions an optimal basic solution uses at most m types, so the exact optimum is found by
  checking every basis of 1..m types among the Pareto-efficient ones (per-dollar capacity).
- `pattern_bound`: whole pods on whole nodes (see its docstring); far tighter when pods are
  large next to the types that are cheap per resource.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

EPS = 1e-9


def _pareto(vectors: list[tuple[float, ...]]) -> list[tuple[float, ...]]:
    """Drop vectors dominated (<= in every dimension) by another one."""
    kept: list[tuple[float, ...]] = []
    for vec in sorted(set(vectors), key=lambda v: tuple(-x for x in v)):
        if not any(all(o >= x - EPS for o, x in zip(other, vec, strict=True)) for other in kept):
            kept.append(vec)
    return kept


def _solve(matrix: list[list[float]], rhs: list[float]) -> list[float] | None:
    """Gaussian elimination with partial pivoting; None when singular."""
    n = len(rhs)
    a = [[*row[:], b] for row, b in zip(matrix, rhs, strict=True)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(a[r][col]))
        if abs(a[pivot][col]) < EPS:
            return None
        a[col], a[pivot] = a[pivot], a[col]
        for r in range(n):
            if r != col:
                factor = a[r][col] / a[col][col]
                for c in range(col, n + 1):
                    a[r][c] -= factor * a[col][c]
    return [a[i][n] / a[i][i] for i in range(n)]


def cover_cost(demand: Sequence[float], supplies: Sequence[tuple[Sequence[float], float]]) -> float:
    """Cheapest fractional cover of `demand` by (capacity vector, price) supplies; inf if impossible."""
    dims = [d for d, amount in enumerate(demand) if amount > EPS]
    if not dims:
        return 0.0
    need = [demand[d] for d in dims]
    # Per-dollar capacity: the LP is scale-free, so a type is only useful if no other gives more per dollar.
    per_dollar = _pareto([tuple(cap[d] / price for d in dims) for cap, price in supplies if price > 0])
    best = float("inf")
    m = len(dims)
    for k in range(1, m + 1):
        for basis in combinations(per_dollar, k):
            for tight in combinations(range(m), k):
                spend = _solve([[basis[j][i] for j in range(k)] for i in tight], [need[i] for i in tight])
                if spend is None or any(s < -EPS for s in spend):
                    continue
                covered = all(
                    sum(s * vec[i] for s, vec in zip(spend, basis, strict=True)) >= need[i] * (1 - 1e-7)
                    for i in range(m)
                )
                if covered:
                    best = min(best, sum(spend))
    return best


def dual_vertices(supplies: Sequence[tuple[Sequence[float], float]]) -> list[tuple[float, float]]:
    """Vertices y of {y >= 0 : y . capacity_t <= price_t for all t} in two dimensions (cpu, memory).

    By LP duality the cheapest fractional cover of a demand d is max over these vertices of y . d,
    so pricing any vector against the whole catalog costs a handful of multiplications.
    """
    per_dollar = _pareto([(cap[0] / price, cap[1] / price) for cap, price in supplies if price > 0])
    lines = [v for v in per_dollar if v[0] > EPS or v[1] > EPS]
    candidates = []
    if lines:
        candidates.append(
            (1 / max(v[0] for v in lines), 0.0) if any(v[0] > EPS for v in lines) else (0.0, 0.0)
        )
        candidates.append(
            (0.0, 1 / max(v[1] for v in lines)) if any(v[1] > EPS for v in lines) else (0.0, 0.0)
        )
    for a, b in combinations(lines, 2):
        y = _solve([list(a), list(b)], [1.0, 1.0])
        if y is not None and y[0] >= -EPS and y[1] >= -EPS:
            candidates.append((max(y[0], 0.0), max(y[1], 0.0)))
    return [y for y in candidates if all(y[0] * v[0] + y[1] * v[1] <= 1 + 1e-7 for v in lines)]


def dual_cost(vertices: Sequence[tuple[float, float]], demand: Sequence[float]) -> float:
    return max((y[0] * demand[0] + y[1] * demand[1] for y in vertices), default=0.0)


@dataclass(frozen=True)
class PodShape:
    """`count` pods of one request vector that may run on the types named in `types`."""

    request: tuple[float, ...]
    count: int
    types: frozenset[str]
    #: A starting weight for the search (e.g. the cheapest $/pod of the shape on its own).
    weight: float


Supply = tuple[tuple[float, ...], float]


def pattern_bound(shapes: Sequence[PodShape], supplies: Mapping[str, Supply]) -> float:
    """Lower bound on $/h that respects whole pods per node (Farley's bound of the configuration LP).

    Give each shape a weight w >= 0. A node of type t holds an integer pattern a (a_s pods of shape
    s that fit its capacity together), worth w.a <= K_t(w), the best such worth (an integer
    knapsack, bounded from above when not solved exactly). With r = max_t K_t(w) / price_t every
    node costs price_t >= K_t(w) / r >= w.a / r, and summing over the nodes of any plan that
    places the pods gives cost >= w.n / r. So w.n / r is below every plan for every w; a small
    search over w keeps the best. Unlike the resource LP it cannot pay for a pod with cpu on one
    type and memory on another, nor fill a node with fractions of a pod.
    """
    shapes = [s for s in shapes if s.count > 0 and s.types]
    if not shapes:
        return 0.0
    types = sorted({name for s in shapes for name in s.types if name in supplies})

    def evaluate(weights: Sequence[float]) -> float:
        demand = sum(w * s.count for w, s in zip(weights, shapes, strict=True))
        if demand <= 0:
            return 0.0
        best_ratio = _best_ratio(shapes, weights, types, supplies)
        return demand / best_ratio if best_ratio > 0 else 0.0

    weights = [max(s.weight, EPS) for s in shapes]
    best = evaluate(weights)
    if len(shapes) <= SEARCHED_SHAPES:
        for factor in (2.0, 0.5, 1.25, 0.8):
            for index in range(len(shapes)):
                trial = list(weights)
                trial[index] *= factor
                if (value := evaluate(trial)) > best * (1 + 1e-9):
                    best, weights = value, trial
    return best


#: Shapes up to which the weights are searched (each step costs a knapsack per type).
SEARCHED_SHAPES = 6
#: Branch-and-bound nodes per knapsack before settling for its fractional upper bound.
KNAPSACK_BUDGET = 4000


def _best_ratio(
    shapes: Sequence[PodShape], weights: Sequence[float], types: Sequence[str], supplies: Mapping[str, Supply]
) -> float:
    """max over types of K_t(w) / price_t, solving knapsacks only for types whose upper bound could win."""
    ranked = []
    for name in types:
        capacity, price = supplies[name]
        items = [
            (w, s.request, s.count)
            for w, s in zip(weights, shapes, strict=True)
            if name in s.types and _fits_one(s.request, capacity)
        ]
        if items and price > 0:
            ranked.append((_fractional(items, capacity) / price, name, items))
    ranked.sort(key=lambda r: -r[0])
    best = 0.0
    for upper, name, items in ranked:
        if upper <= best:
            break
        capacity, price = supplies[name]
        best = max(best, _knapsack(items, capacity) / price)
    return best


def _fits_one(request: Sequence[float], capacity: Sequence[float]) -> bool:
    return all(r <= c + EPS for r, c in zip(request, capacity, strict=True))


def _max_count(request: Sequence[float], free: Sequence[float], limit: int) -> int:
    count = limit
    for r, f in zip(request, free, strict=True):
        if r > EPS:
            count = min(count, int((f + EPS) // r))
    return max(count, 0)


def _fractional(items: Sequence[tuple[float, Sequence[float], int]], free: Sequence[float]) -> float:
    """Upper bound on the knapsack: each resource alone, filled fractionally by worth per unit; the least."""
    bound = sum(w * _max_count(req, free, n) for w, req, n in items)
    for d, room in enumerate(free):
        room = max(room, 0.0)
        total = 0.0
        for w, req, n in sorted(items, key=lambda i: -(i[0] / i[1][d]) if i[1][d] > EPS else -math.inf):
            cap = _max_count(req, free, n)
            if req[d] <= EPS:
                total += w * cap
                continue
            take = min(float(cap), room / req[d])
            total += w * take
            room -= take * req[d]
        bound = min(bound, total)
    return bound


def _knapsack(items: Sequence[tuple[float, Sequence[float], int]], capacity: Sequence[float]) -> float:
    """Best integer worth of a pattern, or an upper bound on it when the search runs out of budget."""
    order = sorted(items, key=lambda i: -i[0])
    best = 0.0
    budget = KNAPSACK_BUDGET

    def search(index: int, free: list[float], worth: float) -> bool:
        nonlocal best, budget
        budget -= 1
        if budget < 0:
            return False
        if index == len(order):
            best = max(best, worth)
            return True
        if worth + _fractional(order[index:], free) <= best + EPS:
            return True
        w, req, n = order[index]
        for count in range(_max_count(req, free, n), -1, -1):
            rest = [f - count * r for f, r in zip(free, req, strict=True)]
            if not search(index + 1, rest, worth + count * w):
                return False
        return True

    if search(0, list(capacity), 0.0):
        return best
    return _fractional(order, capacity)
