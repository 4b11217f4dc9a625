"""The whole-node bound (benchmarks/integerbound.py): the cheapest plan in whole nodes, which the
configuration LP undercuts by buying fractions of a node."""

from __future__ import annotations

import pytest

from benchmarks import consolidation
from benchmarks.configlp import Pool
from benchmarks.integerbound import integer_bound, pool_bound
from extender.scheduling.solver import solve

ONE = (1.0, 1.0, 1.0, 0.0)


def test_three_pods_buy_the_dearer_node_that_holds_them_all() -> None:
    # a: $1.00 for 2 pods, b: $1.60 for 3. The LP buys 1.5 a ($1.50); whole nodes cost 2 a ($2.00)
    # or 1 b ($1.60), so the bound is $1.60 and proved.
    pool = Pool(
        shapes=[ONE],
        counts=[3],
        types=[
            ("a", (2.0, 2.0, 110.0, 0.0), 1.0, frozenset({0})),
            ("b", (3.0, 3.0, 110.0, 0.0), 1.6, frozenset({0})),
        ],
    )
    found = pool_bound(pool, ceiling=2.0, time_limit=10)
    assert found.proved
    assert abs(found.bound - 1.6) < 1e-9
    assert abs(found.plan - 1.6) < 1e-9


def test_two_shapes_that_do_not_share_a_node_well() -> None:
    # Three (1 cpu, 3 mem) pods and two (3 cpu, 1 mem) on nodes of (4, 4) at $1: no node holds two
    # of the first shape (6 > 4 mem), so 3 nodes ($3), where the LP's 11 mem / 4 buys 2.75.
    pool = Pool(
        shapes=[(1.0, 3.0, 1.0, 0.0), (3.0, 1.0, 1.0, 0.0)],
        counts=[3, 2],
        types=[("t", (4.0, 4.0, 110.0, 0.0), 1.0, frozenset({0, 1}))],
    )
    found = pool_bound(pool, ceiling=5.0, time_limit=10)
    assert found.proved
    assert abs(found.bound - 3.0) < 1e-9


def test_on_a_benchmark_night_between_the_lp_bound_and_karpys_plan() -> None:
    # Seed 4 at 09:00: 26 pods on 2 nodes; the configuration LP undercuts every whole-node plan.
    types = consolidation.catalog()
    apps = consolidation.workload(4)
    shapes = {app: (cpu, mem) for app, cpu, mem, _, _ in apps}
    wanted = consolidation.wanted_at(apps, 9.0)
    pods = [consolidation.make_pod(a, *shapes[a], k) for a, n in wanted.items() for k in range(n)]
    plan = solve(pods, [consolidation.provisioner(consolidate=False)], types)
    allowed = [t for t in types if t.arch == consolidation.ARCH]
    found = integer_bound(pods, allowed, ["on-demand"], plan.total_price, time_limit=30)
    assert found.proved
    assert plan.lower_bound < found.bound <= plan.total_price + 1e-9


def test_a_ceiling_no_plan_meets_is_an_error_not_a_bound() -> None:
    # Given a plan's price as the ceiling, no whole-node plan under it means the catalog views differ.
    pool = Pool(shapes=[ONE], counts=[3], types=[("a", (2.0, 2.0, 110.0, 0.0), 1.0, frozenset({0}))])
    with pytest.raises(RuntimeError, match="no whole-node plan"):
        pool_bound(pool, ceiling=1.5, time_limit=10)
