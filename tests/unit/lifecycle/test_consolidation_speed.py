"""What keeps decide() fast on a large cluster without changing what a simulation finds: the whole
pool first in multi-node consolidation, and full or cordoned nodes left out of a simulation where
no pod counts other pods (plain data; benchmarks.consolidation times it at 1,000 nodes)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from extender.lifecycle.consolidation import decide as consolidation
from extender.lifecycle.consolidation.decide import Method, decide

from .test_consolidation import node, pod, pods, view


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The existing nodes handed to each solve."""
    calls: list[list[str]] = []
    solve = consolidation.solve

    def counted(*args: Any, **kw: Any) -> Any:
        calls.append([n.name for n in kw["existing_nodes"]])
        return solve(*args, **kw)

    monkeypatch.setattr(consolidation, "solve", counted)
    return calls


def test_multi_node_tries_the_whole_pool_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """Karpenter's firstNConsolidationOption binary-searches the prefix (here 3, then 4 of 4); when
    the whole pool merges, one solve finds the same move."""
    light = [node(f"light-{i}", "m5.xlarge", pods(f"p{i}", 1, "500m")) for i in range(4)]
    roomy = node("roomy", "m5.4xlarge", pods("q", 1, "1"), do_not_consolidate=True)
    calls = _counting(monkeypatch)
    action = decide(view(*light, roomy))
    assert action is not None and action.method is Method.MULTI
    assert sorted(action.names) == [f"light-{i}" for i in range(4)] and len(calls) == 1


def test_a_simulation_leaves_out_nodes_that_cannot_take_a_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without spread, inter-pod rules, ports or volumes in play, a full or cordoned node is no
    bin: it is not loaded, and the plan is the one the solver makes with every node."""
    leaving = node("leaving", "m5.large", pods("a", 1, "500m"))
    full = node("full", "m5.large", pods("f", 1, "1900m"))
    cordoned = dataclasses.replace(
        node("cordoned", "m5.xlarge", []),
        node=dataclasses.replace(node("cordoned", "m5.xlarge", []).node, schedulable=False),
    )
    roomy = node("roomy", "m5.xlarge", pods("r", 1))
    cluster = view(leaving, full, cordoned, roomy)
    everything = consolidation.solve(
        list(leaving.movable),
        cluster.provisioners,
        cluster.instance_types,
        existing_nodes=[n.node for n in cluster.nodes if n.name != "leaving"],
        with_bound=False,
    )
    calls = _counting(monkeypatch)
    plan = consolidation.simulate_removal(cluster, (leaving,))
    assert calls == [["roomy"]]
    assert plan.existing == everything.existing and plan.nodes == everything.nodes


def test_a_running_pod_with_anti_affinity_keeps_every_node(monkeypatch: pytest.MonkeyPatch) -> None:
    """A running pod's required anti-affinity repels pods from its node's domain, full or not: with
    one in the cluster, the simulation sees every node."""
    anti = [{"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "topology.kubernetes.io/zone"}]
    guard = pod("guard", "1900m", labels={"app": "y"}, pod_anti_requirements=anti)
    leaving = node("leaving", "m5.large", pods("a", 1, "500m"))
    full = node("full", "m5.large", [guard])
    roomy = node("roomy", "m5.xlarge", pods("r", 1))
    calls = _counting(monkeypatch)
    consolidation.simulate_removal(view(leaving, full, roomy), (leaving,))
    assert calls == [["full", "roomy"]]
