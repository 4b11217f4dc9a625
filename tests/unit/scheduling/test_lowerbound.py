"""Lower bounds on small instances whose optimum is known by hand."""

import pytest

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
