"""Lower bound on $/h for a batch: the LP relaxation of covering its total requests with offerings.

min sum(price_t * x_t) subject to sum(x_t * allocatable_t) >= demand, x >= 0. With m resource
dimensions an optimal basic solution uses at most m types, so the exact optimum is found by
checking every basis of 1..m types among the Pareto-efficient ones (per-dollar capacity), which
for cpu + memory (+ GPUs) is a handful. Used by the solver to report plan cost / lower bound.
"""

from __future__ import annotations

from collections.abc import Sequence
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
    a = [row[:] + [b] for row, b in zip(matrix, rhs, strict=True)]
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
