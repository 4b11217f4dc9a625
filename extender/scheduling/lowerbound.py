"""Lower bounds on $/h for a batch; the solver reports the larger as plan cost / lower bound.

- `cover_cost`: the LP relaxation of covering the batch's total requests with offerings,
  min sum(price_t * x_t) subject to sum(x_t * allocatable_t) >= demand, x >= 0. With m resource
  dimensions an optimal basic solution uses at most m types, so the exact optimum is found by
  checking every basis of 1..m types among the Pareto-efficient ones (per-dollar capacity).
- `pattern_bound`: whole pods on whole nodes (see its docstring); far tighter when pods are
  large next to the types that are cheap per resource. With few pod shapes it is the optimum of
  the configuration LP (whole-pod patterns), found by cutting planes.
- `node_count_bound`: the cover LP plus a per-node charge, for batches that need at least a known
  number of nodes (hostname anti-affinity groups).
- `shape_cover_bound`: the exact cheapest set of nodes holding one shape's pods alone (a small
  integer program, solved by dynamic programming over the pod count); every plan holds those pods
  somewhere, so the largest over shapes is a bound, and for a batch of one shape it is the optimum.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

EPS = 1e-9
#: Slack on `_best_ratio`'s cheap bound so that float rounding never puts it below the costly one.
LOOSE = 1 + 1e-9


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
    """`count` pods of one request vector that may run on the types named in `types`.

    The request may end in exclusivity dimensions (see `pattern_bound`).
    """

    request: tuple[float, ...]
    count: int
    types: frozenset[str]
    #: The weight used when there are too many shapes to search (e.g. the shape's cheapest $/pod
    #: on its own).
    weight: float


Supply = tuple[tuple[float, ...], float]
Pattern = tuple[int, ...]

#: Up to this many shapes the weights are searched, which makes the bound the configuration LP's
#: optimum; beyond it the shapes' own weights are used as they are.
SEARCHED_SHAPES = 8
#: Cutting-plane rounds (each prices every type whose fractional worth could win).
ROUNDS = 40
#: Cuts added per round: the most violated patterns.
CUTS_PER_ROUND = 4
#: Branch-and-bound nodes per knapsack before settling for its fractional upper bound: a large
#: budget where the weights are searched (few shapes, and exact knapsacks make the LP exact: with
#: 4,000 the bound stayed 2-3 % below the LP's optimum on mixes of 100-200 small pods), a small one
#: for the single evaluation over many shapes, whose knapsacks rarely finish anyway.
KNAPSACK_BUDGET = 40_000
UNSEARCHED_BUDGET = 200
#: The large budget lasts for this many nodes over one LP's knapsacks, then each gets
#: PATTERN_BUDGET: knapsacks too hard to finish do not make the bound slow. With 50,000 the bound
#: of one 750-pod mix still stayed 1.4 % below the LP's optimum.
LP_WORK = 100_000
PATTERN_BUDGET = 4000


@dataclass
class Allowance:
    """Branch-and-bound nodes for knapsacks: `each` per knapsack while `left` lasts, then `floor`."""

    each: int
    left: float = math.inf
    floor: int = 0

    def grant(self) -> int:
        return max(self.floor, int(min(self.each, self.left)))

    def spend(self, nodes: int) -> None:
        self.left -= nodes


def pattern_bound(shapes: Sequence[PodShape], supplies: Mapping[str, Supply]) -> float:
    """Lower bound on $/h that respects whole pods per node (Farley's bound of the configuration LP).

    Give each shape a weight w >= 0. A node of type t holds an integer pattern a (a_s pods of shape
    s that fit its capacity together, a_s <= count_s), worth w.a <= K_t(w), the best such worth (an
    integer knapsack, bounded from above when not solved exactly). With r = max_t K_t(w) / price_t
    every node costs price_t >= K_t(w) / r >= w.a / r, and summing over the nodes of any plan that
    places the pods gives cost >= w.n / r. So w.n / r is below every plan for every w.

    Exclusivity dimensions make the same argument cover pod anti-affinity: a pod of a group at most
    one of which may share a node requests 1 unit of the group's dimension and every type supplies
    1, so no pattern — hence no node of any valid plan — holds two of them, and each such pod is
    charged at least the cheapest type that can hold it alongside whatever else shares its node.

    With few shapes w is chosen by cutting planes on the dual of the configuration LP
    (`configuration_lp`); beyond SEARCHED_SHAPES the shapes' own weights are used as they are.
    """
    shapes = [s for s in shapes if s.count > 0 and s.types]
    if not shapes:
        return 0.0
    if len(shapes) > SEARCHED_SHAPES:
        unsearched = Allowance(UNSEARCHED_BUDGET)
        menu = _Menu(shapes, supplies, pruned=False)
        return _bound_at([s.weight for s in shapes], shapes, menu, supplies, unsearched)[0]
    return configuration_lp(shapes, supplies)[0]


@dataclass(frozen=True)
class PatternUse:
    """`nodes` (fractional) nodes of type `type`, each holding `pattern[s]` pods of shape s."""

    type: str
    pattern: Pattern
    nodes: float


def configuration_lp(
    shapes: Sequence[PodShape], supplies: Mapping[str, Supply], budget: Allowance | None = None
) -> tuple[float, list[PatternUse]]:
    """The configuration LP over the patterns cutting planes find: (the bound, its primal solution).

    The dual is solved: maximise w.n subject to w.a <= price_t for the patterns found so far; the
    knapsacks at the new optimum return the patterns it violates most. Every round's w gives a
    valid bound (`pattern_bound`), so stopping early only loosens it; with no violated pattern left
    it equals the LP optimum. The optimal duals of the cuts are the primal: how many nodes of each
    (type, pattern) cover the shapes' counts at the LP's cost, a fractional plan that the solver
    rounds (rounding.py). Shapes with count 0 or no type are given no pods. `budget`: knapsack
    nodes (an unfinished knapsack is bounded from above, which only loosens the bound); by
    default KNAPSACK_BUDGET each for LP_WORK nodes, then PATTERN_BUDGET each.
    """
    if budget is None:
        budget = Allowance(KNAPSACK_BUDGET, LP_WORK, PATTERN_BUDGET)
    shapes = list(shapes)
    live = [s.count > 0 and bool(s.types) for s in shapes]
    if not any(live):
        return 0.0, []
    menu = _Menu(shapes, supplies, pruned=True)
    counts = [float(s.count) if ok else 0.0 for s, ok in zip(shapes, live, strict=True)]
    cuts: list[tuple[list[float], float]] = []
    columns: list[tuple[str, Pattern]] = []
    seen: set[tuple[str, Pattern]] = set()
    best = 0.0
    primal: list[PatternUse] = []
    starts = [j for j, ok in enumerate(live) if ok]
    # Each shape alone first, so that a cut caps every direction of w before the LP is solved.
    weights: list[float] | None = [1.0 if j == starts[0] else 0.0 for j in range(len(shapes))]
    for step in range(ROUNDS + len(starts)):
        if weights is None:
            break
        bound, found = _bound_at(weights, shapes, menu, supplies, budget)
        best = max(best, bound)
        starting = step < len(starts)
        added = 0
        for worth, name, pattern in found:
            if added == CUTS_PER_ROUND or (worth <= 1 + 1e-9 and (added or not starting)):
                break
            if (name, pattern) not in seen:
                seen.add((name, pattern))
                cuts.append(([float(a) for a in pattern], supplies[name][1]))
                columns.append((name, pattern))
                added += 1
        if step + 1 < len(starts):
            weights = [1.0 if j == starts[step + 1] else 0.0 for j in range(len(shapes))]
        elif added:
            solved = _maximise(counts, cuts)
            weights = solved[0] if solved else None
            if solved:
                primal = [
                    PatternUse(name, pattern, x)
                    for (name, pattern), x in zip(columns, solved[1], strict=True)
                    if x > EPS
                ]
        else:
            break  # nothing violated: w is optimal over all patterns and its bound the LP optimum
    return best, primal


def _order(name: str, supply: Supply) -> tuple[float, tuple[float, ...], str]:
    return supply[1], tuple(-c for c in supply[0]), name


class _Catalog:
    """What the LP needs of a catalog whatever the batch: the types with a positive price,
    cheapest first; and for a type, the types before it in (price, -capacity, name) order with at
    least its capacity in every dimension (so at no higher price), found when first asked for."""

    def __init__(self, supplies: Mapping[str, Supply]) -> None:
        self.supplies = dict(supplies)
        self.ranked = sorted(supplies, key=lambda n: _order(n, supplies[n]))
        self.position = {name: at for at, name in enumerate(self.ranked)}
        self.by_price = sorted((price, name) for name, (_, price) in supplies.items() if price > 0)
        self._dominators: dict[str, tuple[str, ...]] = {}

    def dominators(self, name: str) -> tuple[str, ...]:
        found = self._dominators.get(name)
        if found is None:
            capacity = self.supplies[name][0]
            found = self._dominators[name] = tuple(
                other
                for other in self.ranked[: self.position[name]]
                if all(a >= b for a, b in zip(self.supplies[other][0], capacity, strict=True))
            )
        return found


#: Catalogs kept (the Provisioner views of a cluster; oldest evicted first).
CATALOG_CACHE = 32
_catalogs: dict[frozenset[tuple[str, Supply]], _Catalog] = {}


def _catalog(supplies: Mapping[str, Supply]) -> _Catalog:
    key = frozenset(supplies.items())
    found = _catalogs.get(key)
    if found is None:
        while len(_catalogs) >= CATALOG_CACHE:
            del _catalogs[next(iter(_catalogs))]
        found = _catalogs[key] = _Catalog(supplies)
    return found


Fit = tuple[int, tuple[float, ...], int, int]


class _Menu:
    """What each type may hold whatever the weights, derived when a type is first looked at and
    kept for the LP's rounds: the shapes that may use it and fit it alone, as (shape index,
    request, count, how many fit alone); none for a type no shape may use or, with `pruned`, a
    type another beats.

    A type beats another when it has at least its capacity in every dimension, at no higher
    price, and is usable by every shape that may use the other. It holds every pattern the beaten
    one holds, at no higher price, so K_u(w) / price_u >= K_t(w) / price_t for every w: dropping
    t changes neither the bound's ratio r nor the LP's optimum, and saves its knapsacks. Beating
    is transitive, so a type is dropped exactly when some type before it (cheapest first) beats
    it; which types beat which by price and capacity is derived once per catalog (`_Catalog`).
    """

    def __init__(self, shapes: Sequence[PodShape], supplies: Mapping[str, Supply], pruned: bool) -> None:
        self.shapes = shapes
        self.supplies = supplies
        self.catalog = _catalog(supplies)
        self.names: frozenset[str] = frozenset().union(*(s.types for s in shapes))
        self.pruned = pruned
        self._fits: dict[str, list[Fit]] = {}
        self._users: dict[str, frozenset[int]] = {}

    def fits(self, name: str) -> list[Fit]:
        found = self._fits.get(name)
        if found is None:
            found = []
            if name in self.names and not (self.pruned and self._beaten(name)):
                capacity = self.supplies[name][0]
                found = [
                    (index, s.request, s.count, _max_count(s.request, capacity, s.count))
                    for index, s in enumerate(self.shapes)
                    if name in s.types and _fits_one(s.request, capacity)
                ]
            self._fits[name] = found
        return found

    def _beaten(self, name: str) -> bool:
        users = self.users(name)
        return any(
            other in self.names and users <= self.users(other) for other in self.catalog.dominators(name)
        )

    def users(self, name: str) -> frozenset[int]:
        found = self._users.get(name)
        if found is None:
            found = self._users[name] = frozenset(i for i, s in enumerate(self.shapes) if name in s.types)
        return found


def _bound_at(
    weights: Sequence[float],
    shapes: Sequence[PodShape],
    menu: _Menu,
    supplies: Mapping[str, Supply],
    budget: Allowance,
) -> tuple[float, list[tuple[float, str, Pattern]]]:
    """w.n / r at these weights, with the patterns the knapsacks found (see `_best_ratio`)."""
    demand = sum(w * s.count for w, s in zip(weights, shapes, strict=True))
    ratio, found = _best_ratio(shapes, weights, menu, supplies, budget)
    return (demand / ratio if demand > 0 and ratio > 0 else 0.0), found


#: Per-node charges tried by `node_count_bound`, as fractions of the cheapest type's price.
NODE_CHARGES = (0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875)


def node_count_bound(
    demand: Sequence[float], nodes: int, supplies: Sequence[tuple[Sequence[float], float]]
) -> float:
    """Lower bound for a batch that needs at least `nodes` nodes (e.g. the pods of a hostname
    anti-affinity group, no two of which may share one).

    For a charge phi with 0 <= phi < every price, take y >= 0 with y.capacity_t <= price_t - phi
    for every type (a dual solution of the cover LP at prices lowered by phi). Every node then
    costs price_t >= y.capacity_t + phi >= y.(its pods' requests) + phi, so a plan costs at least
    y.demand + phi * (its node count) >= cover_cost(demand, prices - phi) + phi * nodes. Each phi
    gives a valid bound; a few are tried. Unlike the cover LP alone it charges the per-node
    overhead that many small nodes pay.
    """
    cheapest = min((price for _, price in supplies), default=0.0)
    best = 0.0
    for fraction in NODE_CHARGES:
        phi = fraction * cheapest
        cover = cover_cost(demand, [(capacity, price - phi) for capacity, price in supplies])
        if math.isfinite(cover):
            best = max(best, cover + phi * nodes)
    return best


def _maximise(
    objective: Sequence[float], cuts: Sequence[tuple[list[float], float]]
) -> tuple[list[float], list[float]] | None:
    """max objective.x subject to row.x <= price for each cut, x >= 0 (prices > 0, so x = 0 is
    feasible): a dense primal simplex with Bland's rule. Returns (x, the cuts' optimal duals), the
    duals read from the final cost row's slack columns; None when unbounded."""
    width, height = len(objective), len(cuts)
    table = [
        [*row, *(1.0 if i == k else 0.0 for k in range(height)), rhs] for i, (row, rhs) in enumerate(cuts)
    ]
    cost = [-c for c in objective] + [0.0] * (height + 1)
    basis = [width + i for i in range(height)]
    while True:
        enter = next((j for j in range(width + height) if cost[j] < -EPS), None)
        if enter is None:
            break
        leave, best_ratio = None, math.inf
        for i, row in enumerate(table):
            if row[enter] > EPS:
                ratio = row[-1] / row[enter]
                if ratio < best_ratio - EPS or (
                    ratio <= best_ratio + EPS and leave is not None and basis[i] < basis[leave]
                ):
                    leave, best_ratio = i, ratio
        if leave is None:
            return None
        pivot_row = table[leave]
        pivot = pivot_row[enter]
        table[leave] = pivot_row = [v / pivot for v in pivot_row]
        for i, row in enumerate(table):
            if i != leave and abs(row[enter]) > EPS:
                factor = row[enter]
                table[i] = [v - factor * p for v, p in zip(row, pivot_row, strict=True)]
        factor = cost[enter]
        cost = [v - factor * p for v, p in zip(cost, pivot_row, strict=True)]
        basis[leave] = enter
    solution = [0.0] * width
    for i, var in enumerate(basis):
        if var < width:
            solution[var] = table[i][-1]
    return solution, [max(cost[width + i], 0.0) for i in range(height)]


def _best_ratio(
    shapes: Sequence[PodShape],
    weights: Sequence[float],
    menu: _Menu,
    supplies: Mapping[str, Supply],
    budget: Allowance,
) -> tuple[float, list[tuple[float, str, Pattern]]]:
    """max over types of K_t(w) / price_t, solving knapsacks only for types whose upper bound could
    win; with the patterns found as (worth / price, type, pattern), the most valuable first."""
    # Types are taken by their fractional upper bound, largest first (ties by name), until one
    # cannot beat the best ratio found. That bound is costly, so a type enters the heap under
    # cheaper ones that are never smaller, and is priced only when it reaches the top: first all
    # pods' worth over its price (types enter cheapest first, only while that could lead), then
    # what fits of each shape alone, summed; both plus the largest weight, which `_fractional` may
    # add for one item of a mutually exclusive set (even one of count 0). The types run and their
    # order stay the same.
    live = [(w, s.count) for w, s in zip(weights, shapes, strict=True) if w > EPS]
    top = (sum(w * n for w, n in live) + max((w for w, _ in live), default=0.0)) * LOOSE * LOOSE + 2 * EPS
    heap: list[tuple[float, str, bool, list[Item]]] = []
    stream, pos = menu.catalog.by_price, 0
    best = 0.0
    found = []
    while True:
        while pos < len(stream) and (not heap or -(top / stream[pos][0]) <= heap[0][0]):
            price, name = stream[pos]
            pos += 1
            fits = [f for f in menu.fits(name) if weights[f[0]] > EPS]
            if fits:
                alone = sum(weights[index] * most for index, _, _, most in fits)
                alone += max(weights[index] for index, *_ in fits)
                items: list[Item] = [
                    (index, weights[index], request, count) for index, request, count, _ in fits
                ]
                heapq.heappush(heap, (-(alone * LOOSE + EPS) / price, name, False, items))
        if not heap:
            break
        key, name, exact, items = heapq.heappop(heap)
        capacity, price = supplies[name]
        if not exact:
            heapq.heappush(heap, (-(_fractional(items, capacity) / price), name, True, items))
            continue
        if -key <= best:
            break
        ratio, pattern = _solved(name, items, len(shapes), supplies, budget)
        best = max(best, ratio)
        found.append(pattern)
    found.sort(key=lambda v: -v[0])
    return best, found


def _solved(
    name: str, items: Sequence[Item], width: int, supplies: Mapping[str, Supply], budget: Allowance
) -> tuple[float, tuple[float, str, Pattern]]:
    """The type's knapsack: (its upper bound over price, (worth / price, type, the pattern))."""
    capacity, price = supplies[name]
    worth, counts, bound = _knapsack(items, capacity, budget)
    pattern = [0] * width
    for (index, *_), count in zip(items, counts, strict=True):
        pattern[index] = count
    return bound / price, (worth / price, name, tuple(pattern))


def _fits_one(request: Sequence[float], capacity: Sequence[float]) -> bool:
    return all(r <= c + EPS for r, c in zip(request, capacity, strict=True))


def _max_count(request: Sequence[float], free: Sequence[float], limit: int) -> int:
    count = limit
    for r, f in zip(request, free, strict=True):
        if r > EPS:
            count = min(count, int((f + EPS) // r))
    return max(count, 0)


Item = tuple[int, float, Sequence[float], int]


def _fractional(items: Sequence[Item], free: Sequence[float]) -> float:
    """Upper bound on the knapsack's worth.

    Items that need more than half of what is left of some dimension exclude each other (one
    anti-affinity group per node; one pod larger than half the node). At most one of them is in
    any pattern, so they add at most the largest of their worths to what the others can fill.
    """
    free = [max(f, 0.0) for f in free]
    exclusive: list[Item] = []
    fitting = [i for i in items if _fits_one(i[2], free)]
    for d, room in enumerate(free):
        big = [i for i in fitting if i[2][d] > room / 2 + EPS]
        if len(big) > len(exclusive):
            exclusive = big
    if len(exclusive) < 2:
        return _fill(items, free)
    excluded = {id(i) for i in exclusive}
    return max(i[1] for i in exclusive) + _fill([i for i in items if id(i) not in excluded], free)


#: Mixes of two resources' shares tried as surrogate constraints in `_fill`.
MIXES = (0.25, 0.5, 0.75)


def _fill(items: Sequence[Item], free: Sequence[float]) -> float:
    """The least over surrogate constraints (one resource, or a mix of the first two resources'
    shares of `free`) of filling it fractionally by worth per unit.

    Any pattern that fits `free` fits every nonnegative combination of its constraints, so each
    fill bounds the knapsack. One resource alone is loose when pods differ in their cpu:memory
    ratio; the mixes recover most of the two-resource LP relaxation.
    """
    # The knapsack search calls this at every node it visits: each item's count is taken once,
    # and a surrogate's sizes are its one or two nonzero terms (the same floats the full dot
    # product gives, since the other terms add exact zeros).
    caps = [_max_count(req, free, n) for _, _, req, n in items]
    bound = sum(item[1] * cap for item, cap in zip(items, caps, strict=True))
    surrogates: list[tuple[float, list[tuple[float, float, int]]]] = [
        (room, [(item[1], item[2][d], cap) for item, cap in zip(items, caps, strict=True)])
        for d, room in enumerate(free)
    ]
    if len(free) >= 2 and free[0] > EPS and free[1] > EPS:
        for t in MIXES:
            a, b = t / free[0], (1 - t) / free[1]
            sizes = [
                (item[1], a * item[2][0] + b * item[2][1], cap) for item, cap in zip(items, caps, strict=True)
            ]
            surrogates.append((a * free[0] + b * free[1], sizes))
    for room, sized in surrogates:
        total = 0.0
        for w, size, cap in sorted(sized, key=lambda i: -(i[0] / i[1]) if i[1] > EPS else -math.inf):
            if size <= EPS:
                total += w * cap
                continue
            take = min(float(cap), room / size)
            total += w * take
            room -= take * size
        bound = min(bound, total)
    return bound


def _knapsack(
    items: Sequence[Item], capacity: Sequence[float], allowance: Allowance
) -> tuple[float, list[int], float]:
    """Best integer pattern: (its worth, counts in `items` order, an upper bound on any pattern's
    worth). The bound equals the worth unless the search ran out of budget (the nodes it
    searched are spent from `allowance`)."""
    granted = budget = allowance.grant()
    order = sorted(range(len(items)), key=lambda i: -items[i][1])
    best, best_counts = 0.0, [0] * len(items)
    counts = [0] * len(items)

    def search(depth: int, free: list[float], worth: float) -> bool:
        nonlocal best, best_counts, budget
        budget -= 1
        if budget < 0:
            return False
        if depth == len(order):
            if worth > best:
                best, best_counts = worth, list(counts)
            return True
        if worth + _fractional([items[i] for i in order[depth:]], free) <= best + EPS:
            return True
        _, w, req, n = items[order[depth]]
        for count in range(_max_count(req, free, n), -1, -1):
            counts[order[depth]] = count
            rest = [f - count * r for f, r in zip(free, req, strict=True)]
            if not search(depth + 1, rest, worth + count * w):
                counts[order[depth]] = 0
                return False
        counts[order[depth]] = 0
        return True

    finished = search(0, list(capacity), 0.0)
    allowance.spend(granted - max(budget, 0))
    if finished:
        return best, best_counts, best
    return best, best_counts, max(best, _fractional(items, capacity))


def shape_cover_bound(count: int, holds: Sequence[tuple[int, float]]) -> float:
    """Cheapest $/h of nodes with room for `count` pods of one shape, a type holding k pods at a
    price given as (k, price); inf when no type holds one.

    Removing the other pods from any plan leaves nodes that still hold these, at the same cost, so
    this bounds every plan from below. Types that hold fewer pods and cost no less than another are
    dropped first; then best[c] = min over types of price + best[c - k], for c up to `count`.
    """
    if count <= 0:
        return 0.0
    useful: list[tuple[int, float]] = []
    for k, price in sorted(((k, p) for k, p in holds if k > 0), key=lambda h: (-h[0], h[1])):
        if not useful or price < useful[-1][1] - EPS:
            useful.append((min(k, count), price))
    if not useful:
        return math.inf
    best = [0.0] * (count + 1)
    for c in range(1, count + 1):
        best[c] = min(price + best[max(0, c - k)] for k, price in useful)
    return best[count]
