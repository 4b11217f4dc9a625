"""The consolidation benchmark's simulation, on three hours of falling load: behaviour, not figures
(the figures are printed by `python -m benchmarks.consolidation`)."""

from __future__ import annotations

from benchmarks.consolidation import bound_curve, catalog, simulate


def test_consolidation_is_never_dearer_than_emptiness_and_stays_above_the_bound() -> None:
    types = catalog()
    curve, _ = bound_curve(3.0, 3.0, types)
    runs = {
        p: simulate(p, hours=3.0, step=900, seed=1, types=types, bound=curve)
        for p in ("emptiness", "karpy@100%", "ca")
    }
    assert runs["karpy@100%"].actions > 0
    assert runs["karpy@100%"].dollars < runs["emptiness"].dollars
    assert runs["karpy@100%"].dollars <= runs["ca"].dollars
    for result in runs.values():
        assert result.dollars >= result.bound_dollars * 0.99  # the bound is a bound (interpolated)
        # Without HiGHS time the whole-node bound is the LP bound (tests/unit/benchmarks covers it).
        assert abs(result.integer_dollars - result.bound_dollars) < 1e-9
        # Every node is paid for from launch (the first plan's nodes are not Ready for 90 s).
        assert result.launching_dollars > 0
        assert 0 < result.serving_dollars < result.dollars
    # Consolidation deletes nodes that then drain; nodes that emptiness never deletes never drain.
    assert runs["karpy@100%"].draining_dollars > 0
    assert runs["emptiness"].draining_dollars == 0 or runs["emptiness"].actions > 0
