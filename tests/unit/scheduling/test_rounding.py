"""Plans from the configuration LP (rounding.py): the rounded pattern plan is opened before the
greedy on batches it models, and never on pods whose placement depends on other pods'."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from extender.api import labels as wk
from extender.api.resources import Resources
from extender.scheduling import lowerbound, rounding
from extender.scheduling.solver import solve
from tests import builders
from tests.model_builders import existing_node
from tests.unit.scheduling.builders import catalog, make_provisioner

SPREAD = [
    {
        "maxSkew": 1,
        "topologyKey": wk.HOSTNAME,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "s"}},
    }
]


@pytest.fixture
def modelled(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Pods in each configuration LP the rounding solves."""
    seen: list[int] = []
    real = rounding.configuration_lp

    def spy(
        shapes: Sequence[lowerbound.PodShape],
        supplies: Mapping[str, lowerbound.Supply],
        budget: lowerbound.Allowance,
    ) -> tuple[float, list[lowerbound.PatternUse]]:
        seen.append(sum(s.count for s in shapes))
        return real(shapes, supplies, budget)

    monkeypatch.setattr(rounding, "configuration_lp", spy)
    return seen


def test_pods_with_hostname_rules_are_left_to_the_greedy(modelled: list[int]) -> None:
    plain = [builders.pod(f"p{i}", cpu="1", memory="2Gi") for i in range(6)]
    spread = [
        builders.pod(f"s{i}", cpu="500m", memory="1Gi", labels={"app": "s"}, topologySpreadConstraints=SPREAD)
        for i in range(4)
    ]
    plan = solve(plain + spread, [make_provisioner()], list(catalog()), with_bound=False)
    assert modelled and set(modelled) == {6}
    assert sum(len(n.pods) for n in plan.nodes) == 10
    modelled.clear()
    solve(spread, [make_provisioner()], list(catalog()), with_bound=False)
    assert modelled == []


def test_no_lp_without_a_search_budget(modelled: list[int]) -> None:
    pods = [builders.pod(f"p{i}", cpu="1", memory="2Gi") for i in range(6)]
    solve(pods, [make_provisioner()], list(catalog()), with_bound=False, search_budget=0)
    assert modelled == []


def test_provisioners_with_limits_are_left_to_the_greedy(modelled: list[int]) -> None:
    pods = [builders.pod(f"p{i}", cpu="1", memory="2Gi") for i in range(6)]
    limited = make_provisioner(limits={"resources": {"cpu": "100"}})
    plan = solve(pods, [limited], list(catalog()), with_bound=False)
    assert modelled == [] and sum(len(n.pods) for n in plan.nodes) == 6


def test_the_rounded_lp_plan_reaches_the_bound_where_the_greedy_does_not() -> None:
    # Ten 250m/24Gi pods and two 1-CPU/4Gi ones: the greedy fills a large memory node with the big
    # pods first and buys a second one sized for the rest ($2.52); the LP's patterns put eleven
    # pods on one node and one on a small node, which is the bound ($2.268).
    pods = [builders.pod(f"m{i}", cpu="250m", memory="24Gi") for i in range(10)]
    pods += [builders.pod(f"c{i}", cpu="1", memory="4Gi") for i in range(2)]
    plan = solve(pods, [make_provisioner()], list(catalog()))
    greedy = solve(pods, [make_provisioner()], list(catalog()), search_budget=0, with_bound=False)
    assert sum(len(n.pods) for n in plan.nodes) == 12
    assert plan.total_price == pytest.approx(plan.lower_bound)
    assert plan.total_price < 0.95 * greedy.total_price


def test_existing_nodes_are_filled_first_and_the_lp_plans_the_rest(modelled: list[int]) -> None:
    node = existing_node(
        zone=None,
        hostname=False,
        labels={wk.ARCH: "amd64"},
        allocatable=Resources.of(cpu=3.8, memory=14e9, pods=58),
        requested=Resources.of(cpu=1),
        pod_count=1,
    )
    pods = [builders.pod(f"p{i}", cpu="1") for i in range(6)]
    plan = solve(pods, [make_provisioner()], list(catalog()), existing_nodes=[node], with_bound=False)
    assert len(plan.existing["n1"]) == 2
    assert set(modelled) == {4} and sum(len(n.pods) for n in plan.nodes) == 4
