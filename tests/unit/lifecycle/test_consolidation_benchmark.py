"""The consolidation benchmark's simulation, on three hours of falling load: behaviour, not figures
(the figures are printed by `python -m benchmarks.consolidation`)."""

from __future__ import annotations

from benchmarks.consolidation import bound_curve, catalog, simulate


def test_consolidation_is_never_dearer_than_emptiness_and_stays_above_the_bound() -> None:
    types = catalog()
    curve = bound_curve(3.0, 3.0, types)
    runs = {
        p: simulate(p, hours=3.0, step=900, seed=1, types=types, bound=curve)
        for p in ("emptiness", "karpy@100%", "ca")
    }
    assert runs["karpy@100%"].actions > 0
    assert runs["karpy@100%"].dollars < runs["emptiness"].dollars
    assert runs["karpy@100%"].dollars <= runs["ca"].dollars
    for result in runs.values():
        assert result.dollars >= result.bound_dollars * 0.99  # the bound is a bound (interpolated)
