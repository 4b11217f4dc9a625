"""Lower bounds on small instances whose optimum is known by hand."""

import random

import pytest

from extender.scheduling import lowerbound
from extender.scheduling.lowerbound import PodShape, cover_cost, node_count_bound, pattern_bound


def shape(request: tuple[float, ...], count: int) -> PodShape:
    return PodShape(request, count, frozenset({"t"}), weight=1.0)


def test_whole_pod_bound_reaches_the_configuration_lp_optimum():
    # 6 + 5 > 10: each 6 needs a node of its own and the two 5s share one, so 3 nodes are needed
    # while the resource relaxation sees 22 of 10 units.
    supplies = {"t": ((10.0,), 1.0)}
    shapes = [shape((6.0,), 2), shape((5.0,), 2)]
    assert cover_cost([22.0], list(supplies.values())) == pytest.approx(2.2)
    assert pattern_bound(shapes, supplies) == pytest.approx(3.0)


def test_exclusivity_dimension_keeps_group_members_on_distinct_nodes():
    supplies = {"t": ((10.0, 1.0), 1.0)}
    assert pattern_bound([shape((1.0, 1.0), 4)], supplies) == pytest.approx(4.0)
    assert pattern_bound([shape((1.0, 0.0), 4)], supplies) == pytest.approx(1.0)


def test_node_count_bound_charges_the_overhead_of_many_small_nodes():
    # The large type is cheaper per unit, but four nodes are needed and the small ones are cheapest.
    supplies = [((1.0, 1.0), 1.0), ((10.0, 10.0), 8.0)]
    cover = cover_cost([4.0, 4.0], supplies)
    bound = node_count_bound([4.0, 4.0], 4, supplies)
    assert cover == pytest.approx(3.2)
    assert cover < bound <= 4.0 + 1e-9
    assert node_count_bound([4.0, 4.0], 0, supplies) == pytest.approx(cover)


def _brute_cover(count: int, holds: list[tuple[int, float]]) -> float:
    """Cheapest multiset of types with room for `count` pods, by exhaustive search."""
    best = float("inf")

    def go(i: int, left: int, spent: float) -> None:
        nonlocal best
        if left <= 0:
            best = min(best, spent)
            return
        if i == len(holds) or spent >= best:
            return
        k, price = holds[i]
        for n in range(0, -(-left // k) + 1):
            go(i + 1, left - n * k, spent + n * price)

    go(0, count, 0.0)
    return best


@pytest.mark.parametrize("count", [1, 4, 13, 44, 100])
def test_shape_cover_bound_is_the_cheapest_whole_node_cover(count: int) -> None:
    holds = [(13, 0.408), (57, 1.6832), (3, 0.102), (1, 0.051), (6, 0.204), (2, 0.2)]
    assert lowerbound.shape_cover_bound(count, holds) == pytest.approx(_brute_cover(count, holds))


def test_shape_cover_bound_without_a_holding_type_is_infinite() -> None:
    assert lowerbound.shape_cover_bound(3, [(0, 1.0)]) == float("inf")
    assert lowerbound.shape_cover_bound(0, []) == 0.0


def test_a_one_shape_batch_is_bounded_by_its_whole_node_optimum() -> None:
    from extender.scheduling.solver import solve
    from tests import builders
    from tests.unit.scheduling.builders import catalog, make_provisioner

    pods = [builders.pod(f"p{i}", cpu="1", memory="2Gi") for i in range(30)]
    plan = solve(pods, [make_provisioner()], list(catalog()))
    # The whole-node cover of one shape is reachable, and karpy's greedy finds it here.
    assert plan.lower_bound == pytest.approx(plan.total_price)


def test_configuration_lp_primal_covers_every_pod_at_the_lp_value():
    # Two node types and three shapes over cpu and memory: the optimal duals of the cuts are the
    # node patterns; their price-weighted multiplicities equal the bound and cover every pod.
    supplies = {"big": ((10.0, 6.0), 1.0), "small": ((4.0, 4.0), 0.45)}
    shapes = [
        PodShape((3.0, 1.0), 7, frozenset(supplies), 1.0),
        PodShape((5.0, 2.0), 3, frozenset(supplies), 1.0),
        PodShape((2.0, 3.0), 5, frozenset(supplies), 1.0),
    ]
    bound, primal = lowerbound.configuration_lp(shapes, supplies)
    assert bound == pytest.approx(pattern_bound(shapes, supplies))
    assert sum(use.nodes * supplies[use.type][1] for use in primal) == pytest.approx(bound)
    for index, s in enumerate(shapes):
        assert sum(use.nodes * use.pattern[index] for use in primal) >= s.count - 1e-9
    for use in primal:
        capacity = supplies[use.type][0]
        for d in range(2):
            assert sum(a * s.request[d] for a, s in zip(use.pattern, shapes, strict=True)) <= capacity[d]


def test_configuration_lp_primal_of_the_hand_made_optimum():
    # 6 + 5 > 10: a node per 6 and one for both 5s (see the first test).
    supplies = {"t": ((10.0,), 1.0)}
    _, primal = lowerbound.configuration_lp([shape((6.0,), 2), shape((5.0,), 2)], supplies)
    assert sorted((u.pattern, round(u.nodes, 9)) for u in primal) == [((0, 2), 1.0), ((1, 0), 2.0)]


def test_a_type_beaten_on_every_resource_and_price_changes_nothing():
    # "worse" has less of everything than "small" at a higher price: the bound is the same with or
    # without it, and the primal never uses it.
    supplies = {"big": ((10.0, 6.0), 1.0), "small": ((4.0, 4.0), 0.45), "worse": ((4.0, 3.0), 0.5)}
    shapes = [
        PodShape((3.0, 1.0), 7, frozenset(supplies), 1.0),
        PodShape((2.0, 3.0), 5, frozenset(supplies), 1.0),
    ]
    without = {k: v for k, v in supplies.items() if k != "worse"}
    bound, primal = lowerbound.configuration_lp(shapes, supplies)
    assert bound == pytest.approx(lowerbound.configuration_lp(shapes, without)[0])
    assert all(use.type != "worse" for use in primal)
    # A type that beats it but not for every shape that may use it does not drop it.
    apart = [shapes[0], PodShape((2.0, 3.0), 5, frozenset({"worse"}), 1.0)]
    assert any(use.type == "worse" for use in lowerbound.configuration_lp(apart, supplies)[1])


def _random_instance(rng: random.Random) -> tuple[list[PodShape], dict[str, lowerbound.Supply]]:
    # Few distinct sizes and prices, and twins, so that ties in price, capacity and bound occur.
    supplies: dict[str, lowerbound.Supply] = {}
    for i in range(rng.randint(1, 30)):
        capacity = (float(rng.choice((2, 4, 8, 16))), float(rng.choice((4, 8, 16, 32))))
        supplies[f"t{i:02d}"] = (capacity, rng.choice((0.0, 0.1, 0.2, 0.4, 0.8)))
        if rng.random() < 0.2:
            supplies[f"t{i:02d}b"] = supplies[f"t{i:02d}"]
    names = sorted(supplies)
    shapes = [
        PodShape(
            (float(rng.choice((1, 2, 3, 5))), float(rng.choice((1, 2, 4, 9)))),
            rng.randint(0, 6),
            frozenset(rng.sample(names, rng.randint(0, len(names)))),
            1.0,
        )
        for _ in range(rng.randint(1, 4))
    ]
    return shapes, supplies


def _eager_ratio(
    shapes: list[PodShape], weights: list[float], types: list[str], supplies: dict[str, lowerbound.Supply]
) -> tuple[float, list[tuple[float, str, lowerbound.Pattern]]]:
    """Every type's fractional bound first, then knapsacks best first (ties by name) until one
    cannot win: the order the cheapest-first scan of `_best_ratio` must reproduce."""
    ranked = []
    for name in types:
        capacity, price = supplies[name]
        items = [
            (index, w, s.request, s.count)
            for index, (w, s) in enumerate(zip(weights, shapes, strict=True))
            if w > lowerbound.EPS and name in s.types and lowerbound._fits_one(s.request, capacity)
        ]
        if items and price > 0:
            ranked.append((lowerbound._fractional(items, capacity) / price, name, items))
    ranked.sort(key=lambda r: -r[0])
    best, budget = 0.0, lowerbound.Allowance(200)
    found: list[tuple[float, str, lowerbound.Pattern]] = []
    for upper, name, items in ranked:
        if upper <= best:
            break
        ratio, pattern = lowerbound._solved(name, items, len(shapes), supplies, budget)
        best = max(best, ratio)
        found.append(pattern)
    found.sort(key=lambda v: -v[0])
    return best, found


def _kept_pairwise(shapes: list[PodShape], supplies: dict[str, lowerbound.Supply]) -> list[str]:
    """Types no earlier kept type beats (capacity, price, users), compared pair by pair."""
    users: dict[str, frozenset[int]] = {}
    for index, s in enumerate(shapes):
        for name in s.types:
            if name in supplies:
                users[name] = users.get(name, frozenset()) | {index}
    kept: list[str] = []
    for name in sorted(users, key=lambda n: (supplies[n][1], tuple(-c for c in supplies[n][0]), n)):
        capacity, price = supplies[name]
        if not any(
            users[name] <= users[o]
            and supplies[o][1] <= price
            and all(a >= b for a, b in zip(supplies[o][0], capacity, strict=True))
            for o in kept
        ):
            kept.append(name)
    return sorted(kept)


def test_lazy_type_scan_runs_the_knapsacks_an_eager_ranking_runs():
    # `_best_ratio` prices a type only when the cheapest-first scan reaches it, and `_Menu` tests
    # dominance only then too: 300 random catalogs give the same ratio, patterns and order as
    # pricing every type first, and the same undominated types as comparing kept pairs.
    rng = random.Random(7)
    for _ in range(300):
        shapes, supplies = _random_instance(rng)
        weights = [rng.choice((0.0, 0.5, 1.0, 1.5)) for _ in shapes]
        for pruned in (False, True):
            menu = lowerbound._Menu(shapes, supplies, pruned)
            types = _kept_pairwise(shapes, supplies) if pruned else sorted(menu.names & supplies.keys())
            lazy = lowerbound._best_ratio(shapes, weights, menu, supplies, lowerbound.Allowance(200))
            assert lazy == _eager_ratio(shapes, weights, types, supplies)
        kept = [n for n in sorted(supplies) if lowerbound._Menu(shapes, supplies, True).fits(n)]
        holding = [
            n for n in _kept_pairwise(shapes, supplies) if lowerbound._Menu(shapes, supplies, False).fits(n)
        ]
        assert kept == holding
