"""Whether a move is worth its evictions (consolidation/worth.py): the pool's savings threshold on
every move kind, and Karpenter's Balanced score."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from extender.api.provisioner import Provisioner
from extender.lifecycle.consolidation.decide import Method, decide
from extender.lifecycle.consolidation.view import NodeState
from extender.lifecycle.consolidation.worth import POD_DELETION_COST, Score, balanced_scores, eviction_cost

from .test_consolidation import node, pod, pods, provisioner, view


def balanced(**kw: Any) -> Provisioner:
    return dataclasses.replace(provisioner(**kw), consolidation_threshold=2)


def test_the_threshold_applies_to_a_single_node_delete() -> None:
    big = node("big", "m5.2xlarge", pods("a", 2), do_not_consolidate=True)
    small = node("small", "m5.large", pods("b", 1))
    assert decide(view(big, small)) is not None  # m5.large ($0.096/h) saved: above $0.02/h and 5 %
    assert decide(view(big, small, provisioners=(provisioner(min_savings="0.1"),))) is None
    assert decide(view(big, small, provisioners=(provisioner(min_savings="0.09"),))) is not None


def test_the_threshold_applies_to_a_replace() -> None:
    cluster = view(node("big", "m5.4xlarge", pods("p", 1)))
    action = decide(cluster)
    assert action is not None and action.method is Method.SINGLE and action.replacements
    share = action.saving / action.price_before
    above = f"{(share + 0.01) * 100:.0f}%"
    assert decide(view(*cluster.nodes, provisioners=(provisioner(min_savings=above),))) is None
    assert decide(view(*cluster.nodes, provisioners=(provisioner(min_savings=f"{action.saving - 0.01}"),)))


def test_the_threshold_applies_to_a_multi_node_merge() -> None:
    nodes = tuple(node(f"n{i}", "m5.xlarge", pods(f"p{i}", 1)) for i in range(3))
    action = decide(view(*nodes))
    assert action is not None and action.method is Method.MULTI
    strict = provisioner(min_savings=f"{action.saving + 0.01}")
    assert decide(view(*nodes, provisioners=(strict,))) is None


def test_empty_nodes_are_deleted_whatever_the_threshold() -> None:
    """Deleting an empty node evicts nothing: the threshold trades savings against evictions."""
    action = decide(view(node("e", "m5.large", []), provisioners=(provisioner(min_savings="1,100%"),)))
    assert action is not None and action.method is Method.EMPTY


def test_eviction_cost_is_karpenters() -> None:
    """Karpenter pkg/utils/disruption EvictionCost: 1 + pod-deletion-cost / 2^27, clamped to
    [-10, 10]; an unparsable cost is ignored."""
    assert eviction_cost(pod("a")) == 1.0
    assert eviction_cost(pod("b", annotations={POD_DELETION_COST: str(2**27)})) == 2.0
    assert eviction_cost(pod("c", annotations={POD_DELETION_COST: "2147483647"})) == 10.0
    assert eviction_cost(pod("d", annotations={POD_DELETION_COST: "-2147483648"})) == -10.0
    assert eviction_cost(pod("e", annotations={POD_DELETION_COST: "lots"})) == 1.0


@pytest.mark.parametrize(
    ("saving", "total_cost", "disruption", "total_disruption", "approved"),
    [
        # designs/balanced-consolidation.md, "Examples" ($/day; the fractions are what count).
        (7.26, 58.08, 3, 80, True),  # oversized node, score 3.33
        (4.84, 58.08, 4, 80, True),  # spare capacity delete, score 1.67
        (2.42, 58.08, 8, 80, False),  # marginal move, score 0.42
        (2.42, 48.40, 8, 80, True),  # uniform pool replace, score 0.50: the k = 2 boundary
        (0.0, 58.08, 1, 80, False),  # same-price replace: never
        (4.84, 58.08, 31, 107, False),  # heterogeneous disruption, node B: score 0.29
    ],
)
def test_score_matches_the_design_docs_examples(
    saving: float, total_cost: float, disruption: float, total_disruption: float, approved: bool
) -> None:
    score = Score("np", saving / total_cost, disruption / total_disruption, k=2)
    assert score.approved is approved


def pool_of(prices_and_pods: list[tuple[str, str, int]]) -> tuple[NodeState, ...]:
    return tuple(node(name, it, pods(name, count, cpu="250m")) for name, it, count in prices_and_pods)


def test_balanced_scores_against_the_pools_totals() -> None:
    """balanced.go: node disruption = 1 + its pods' eviction costs; pool totals over its nodes."""
    nodes = pool_of([("a", "m5.large", 3), ("b", "m5.large", 1)])
    cluster = view(*nodes, provisioners=(balanced(),))
    (score,) = balanced_scores(cluster, nodes[:1], saving=nodes[0].price)
    assert score.savings_fraction == pytest.approx(0.5)
    assert score.disruption_fraction == pytest.approx(4 / 6)
    assert score.value == pytest.approx(0.75) and score.approved
    assert str(score) == (
        "score 0.75 >= threshold 0.50 (consolidationThreshold: 2, savings 50.0%, disruption 66.7%)"
    )
    assert balanced_scores(view(*nodes), nodes[:1], saving=1.0) == []  # not Balanced: no score


def test_balanced_refuses_a_replace_the_default_policy_takes() -> None:
    """A node of many pods replaced for a small share of the pool's cost: WhenEmptyOrUnderutilized
    takes it (any saving above the threshold), Balanced does not (its score is below 1/k)."""
    busy = node("busy", "m5.2xlarge", pods("p", 12, cpu="250m"))
    full = [
        node(f"o{i}", "m5.xlarge", pods(f"o{i}", 1, cpu="3500m"), do_not_consolidate=True) for i in range(6)
    ]
    default = decide(view(busy, *full))
    assert default is not None and default.names == ("busy",) and default.replacements
    # busy's 12 pods and itself are 13 of the pool's 25 units of disruption.
    (score,) = balanced_scores(view(busy, *full, provisioners=(balanced(),)), (busy,), default.saving)
    pool_cost = busy.price + sum(n.price for n in full)
    assert score.value == pytest.approx((default.saving / pool_cost) / (13 / 25)) and score.value < 0.5
    assert decide(view(busy, *full, provisioners=(balanced(),))) is None


def test_balanced_still_takes_a_cheap_delete() -> None:
    """Deleting a (a fifth of the pool's cost, a third of its disruption: score 0.6)."""
    a, b = pool_of([("a", "m5.large", 1), ("b", "m5.2xlarge", 3)])
    action = decide(view(a, dataclasses.replace(b, do_not_consolidate=True), provisioners=(balanced(),)))
    assert action is not None and action.names == ("a",) and not action.replacements
