"""karpy's re-plan method (decide.py `_replans`): beyond Karpenter's moves, a set of nodes whose pods
re-plan onto the other nodes plus any number of new nodes for less, by a real margin."""

from __future__ import annotations

from extender.api import labels as wk
from extender.lifecycle.consolidation import decide as consolidation
from extender.lifecycle.consolidation.decide import Method, decide, plan
from extender.lifecycle.consolidation.view import Settings

from .test_consolidation import AMD64, node, pod, provisioner, view


def lopsided() -> list:
    """Pods that one c5a.2xlarge holds (the greedy's one node) and a c5a.xlarge + c5a.large hold for less."""
    return [pod("a", "500m"), pod("b", "500m"), pod("c", "3")]


def test_one_node_is_replaced_by_two_cheaper_nodes() -> None:
    cluster = view(node("n", "c5a.2xlarge", lopsided()))
    # Karpenter's methods find nothing: one new node for these pods is a c5a.2xlarge again.
    assert decide(cluster, Settings(replan_max_simulations=0)) is None
    action = decide(cluster)
    assert action is not None and action.method is Method.REPLAN and action.names == ("n",)
    assert sorted(r.instance_type.name for r in action.replacements) == ["c5a.large", "c5a.xlarge"]
    assert action.price_after < action.price_before
    assert {p.key for r in action.replacements for p in r.pods} == {p.key for p in action.pods}
    text = action.describe()
    assert text.startswith("Consolidating 1 node(s) into 2 node(s): c5a.")
    assert f"${action.price_before:.3f}/h → ${action.price_after:.3f}/h [n]" in text


def test_no_replan_when_the_saving_is_below_the_threshold() -> None:
    """Neither cents (an absolute minimum) nor a sliver of the nodes' price (a relative one)."""
    cluster = view(node("n", "c5a.2xlarge", lopsided()))
    action = decide(cluster)
    assert action is not None and 0.05 < action.saving < 0.1 and action.saving / action.price_before < 0.3
    # The pool's karpy.sh/consolidation-min-savings: $/h alone, a share alone, both.
    for threshold, kept in (("0.1", True), ("30%", True), ("0.05,20%", False), ("0", False)):
        pool = provisioner(min_savings=threshold)
        assert (decide(view(*cluster.nodes, provisioners=(pool,))) is None) is kept, threshold


def test_a_multi_node_replan_stays_within_the_budget() -> None:
    """Two nodes into two cheaper ones, only when the budget lets two nodes go at once."""
    nodes = (
        node("n0", "c5a.2xlarge", [pod("a", "1500m"), pod("b", "2500m"), pod("c", "1500m")]),
        node("n1", "c5a.xlarge", [pod("d", "3")]),
    )
    two = decide(view(*nodes, provisioners=(provisioner(budget="2"),)))
    assert two is not None and two.method is Method.REPLAN and sorted(two.names) == ["n0", "n1"]
    assert len(two.replacements) == 2 and two.saving > 0
    assert decide(view(*nodes, provisioners=(provisioner(budget="1"),))) is None


def test_plan_lists_a_replan_and_then_nothing() -> None:
    """Applied, a re-plan leaves a cluster with no further move (its new nodes are fresh)."""
    actions = plan(view(node("n", "c5a.2xlarge", lopsided())))
    assert [a.method for a in actions] == [Method.REPLAN]


def test_a_spot_node_is_not_replanned_into_several_spot_nodes() -> None:
    """Karpenter's spot-to-spot flexibility rule is written for one replacement; a re-plan into
    several spot nodes would chase the cheapest pools, so it is not taken."""
    spot = provisioner(requirements=[{"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["spot"]}, AMD64])
    on_demand = view(node("n", "c5a.2xlarge", lopsided()))
    assert decide(on_demand) is not None
    cluster = view(node("n", "c5a.2xlarge", lopsided(), capacity_type="spot"), provisioners=(spot,))
    assert consolidation.simulate_removal(cluster, cluster.nodes).nodes[1:]  # two spot nodes would do
    assert decide(cluster) is None


def test_karpenter_moves_only_do_not_replan() -> None:
    """decide_karpenter (benchmarks.consolidation's `karpenter` policy): the moves Karpenter has,
    so where only a re-plan saves, nothing; where Karpenter's single-node applies, the same action."""
    assert consolidation.decide_karpenter(view(node("n", "c5a.2xlarge", lopsided()))) is None
    small = view(node("a", "m5.2xlarge", [pod("x", "1")]), node("b", "m5.2xlarge", [pod("y", "1")]))
    ours, theirs = decide(small), consolidation.decide_karpenter(small)
    assert ours is not None and theirs is not None and theirs.same_as(ours)
