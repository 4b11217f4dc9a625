"""Nodes, pods and PDB API JSON -> ClusterView (extender/lifecycle/consolidation/snapshot.py)."""

from __future__ import annotations

from datetime import UTC, datetime

from extender.api import labels as wk
from extender.api.node import Node
from extender.cluster.boundpods import group
from extender.cluster.inventory import parse_pods
from extender.lifecycle.consolidation import snapshot

from ..scheduling.builders import catalog
from .test_consolidation import provisioner
from .test_consolidation_cli import cli_node, cli_pod

NOW = datetime(2026, 1, 1, 1, 0, 0, tzinfo=UTC)


def build(**kw):
    return snapshot.build(provisioners=[provisioner()], instance_types=catalog(), now=NOW, **kw)


def test_nodes_carry_price_age_and_what_makes_them_leave() -> None:
    cordoned = cli_node("c", unschedulable=True)
    protected = cli_node("k", annotations={wk.DO_NOT_CONSOLIDATE_ANNOTATION: "true"})
    view = build(
        nodes=[Node.from_manifest(n) for n in (cli_node("a"), cordoned, protected, cli_node("m"))],
        bound=group([cli_pod("p", node_name="a")]),
        marked={"m"},
    )
    by = {n.name: n for n in view.nodes}
    m5 = next(t for t in catalog() if t.name == "m5.xlarge")
    assert by["a"].price == min(o.price for o in m5.offerings if o.capacity_type == "on-demand")
    assert by["a"].age_seconds == 3600 and by["a"].karpy and by["a"].ready
    assert [p.key for p in by["a"].node.pods] == ["default/p"] and by["a"].node.schedulable
    assert by["c"].disrupting and not by["c"].node.schedulable
    assert by["m"].disrupting and not by["m"].node.schedulable
    assert by["k"].do_not_consolidate and not by["k"].disrupting


def test_pdbs_become_allowances_and_pending_pods_are_kept() -> None:
    pdb = {
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}},
        "status": {"disruptionsAllowed": 0},
    }
    null_selector = {"metadata": {"name": "none", "namespace": "default"}, "spec": {}, "status": {}}
    waiting = cli_pod("w", node_name="")
    view = build(nodes=[], bound=group([]), pdbs=[pdb, null_selector], pending=parse_pods([waiting]))
    (allowance,) = view.pdbs
    assert allowance.name == "web" and allowance.disruptions_allowed == 0
    assert [p.key for p in view.pending] == ["default/w"]
