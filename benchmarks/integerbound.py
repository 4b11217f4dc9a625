"""The cheapest whole-node plan for a set of pods, by a compact MIP with HiGHS (scipy), for benchmarks.

The configuration LP (configlp.py, and the solver's own `lowerbound.configuration_lp`) lets a
plan buy a fraction of a node; with the few nodes of a small cluster at night that alone puts it
up to 6 % below every real plan (benchmarks.consolidation's seeds: 2-3 % over a day). This module
asks the integer question directly: node slots of each type (open or not, a 0/1 variable), the
pods of each shape each slot holds (integers within its allocatable), every pod placed, the price
of the open slots minimised. HiGHS's dual bound is a valid lower bound whether or not it finishes
within its time limit; when it finishes, the bound is the optimum.

A plan costing at most `ceiling` (a known plan's price) holds at most floor(ceiling / price) nodes
of a type, so that many slots per type lose no plan that could be optimal. Slots of one type are
opened in order (symmetry breaking); a type another holds no less of, for no more, is dropped
(configlp.pools). Benchmark-only: scipy is a dev dependency, never imported by the product.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_array

from benchmarks.catalogview import fit_count
from benchmarks.configlp import Pool, pools
from extender.api.pod import Pod
from extender.scheduling.instancetypes import InstanceType

EPS = 1e-9


@dataclass(frozen=True)
class IntegerBound:
    #: No whole-node plan costs less (HiGHS's dual bound).
    bound: float
    #: The best plan found (inf when none within the time limit).
    plan: float
    #: The bound is the optimum (HiGHS finished).
    proved: bool


def pool_bound(pool: Pool, ceiling: float, time_limit: float) -> IntegerBound:
    shapes, counts = pool.shapes, pool.counts
    slots: list[int] = []  # the type index of each node slot
    for t, (_, _, price, may) in enumerate(pool.types):
        useful = sum(counts[s] for s in may)  # a slot holds at least one pod or is never opened
        slots += [t] * min(useful, math.floor(ceiling / price + EPS))
    n, s_count, dims = len(slots), len(shapes), len(shapes[0])
    # Variables: y_j (slot j open) for j < n, then x_{j,s} (pods of shape s on slot j) at n + j*S + s.
    cost = np.zeros(n * (1 + s_count))
    upper = np.zeros(n * (1 + s_count))
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    lo: list[float] = []
    hi: list[float] = []

    def constraint(terms: list[tuple[int, float]], low: float, high: float) -> None:
        row = len(lo)
        for col, val in terms:
            rows.append(row)
            cols.append(col)
            vals.append(val)
        lo.append(low)
        hi.append(high)

    for j, t in enumerate(slots):
        _, alloc, price, may = pool.types[t]
        cost[j], upper[j] = price, 1
        xs = [(n + j * s_count + s, s) for s in sorted(may)]
        for col, s in xs:
            fit = min(counts[s], fit_count(shapes[s], alloc))
            upper[col] = fit
            constraint([(col, 1.0), (j, -float(fit))], -np.inf, 0.0)  # only an open slot holds pods
        for d in range(dims):
            terms = [(col, shapes[s][d]) for col, s in xs if shapes[s][d]]
            if terms:
                constraint([*terms, (j, -alloc[d])], -np.inf, 1e-6)
        if j and slots[j - 1] == t:
            constraint([(j, 1.0), (j - 1, -1.0)], -np.inf, 0.0)
    for s in range(s_count):
        constraint([(n + j * s_count + s, 1.0) for j in range(n)], counts[s], np.inf)
    matrix = coo_array((vals, (rows, cols)), shape=(len(lo), len(cost))).tocsr()
    with _quiet():
        found = milp(
            c=cost,
            constraints=LinearConstraint(matrix, lo, hi),
            integrality=np.ones(len(cost)),
            bounds=Bounds(0, upper),
            options={"time_limit": time_limit, "mip_rel_gap": 1e-9},
        )
    if found.status == 2:
        # The ceiling is a real plan's price: no plan under it means this view of the catalog
        # (catalogview) is stricter than the solver's, and the "bound" would not be one.
        raise RuntimeError(f"no whole-node plan costs at most ${ceiling:.4f}/h, the plan's price")
    plan = float(found.fun) if found.x is not None else math.inf
    bound = float(found.mip_dual_bound) if found.mip_dual_bound is not None else 0.0
    return IntegerBound(min(bound, plan), plan, found.status == 0)


@contextmanager
def _quiet() -> Iterator[None]:
    """HiGHS (scipy 1.17) prints a debug line from C to the process's stdout now and then, which
    would land inside the benchmark's tables: hold file descriptor 1 on /dev/null meanwhile."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def integer_bound(
    pods: Sequence[Pod],
    catalog: Sequence[InstanceType],
    capacity_types: Sequence[str],
    ceiling: float,
    time_limit: float = 30.0,
) -> IntegerBound:
    """Summed over independent pools (no type serves two, so their plans add up). `catalog`: the
    types the pods' Provisioner allows; `ceiling`: the price of a plan known to place every pod."""
    parts = [pool_bound(p, ceiling, time_limit) for p in pools(pods, catalog, capacity_types)]
    return IntegerBound(sum(p.bound for p in parts), sum(p.plan for p in parts), all(p.proved for p in parts))
