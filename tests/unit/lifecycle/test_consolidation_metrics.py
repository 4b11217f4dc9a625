"""Churn against savings: each completed consolidation action's $/h saved and pods evicted, by
method and source Provisioner (worker.observe_done; the cost dashboard charts them)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from extender.lifecycle.consolidation.decide import Action, Method
from extender.lifecycle.consolidation.worker import observe_done

from .test_consolidation import node, pods

DASHBOARD = Path(__file__).resolve().parents[3] / "charts" / "karpy" / "dashboards" / "karpy-cost.json"


def sample(name: str, method: str, provisioner: str) -> float:
    value = REGISTRY.get_sample_value(name, {"method": method, "provisioner": provisioner})
    return value or 0.0


def test_an_action_spanning_two_provisioners_counts_in_each_by_its_share() -> None:
    a = node("a", "m5.xlarge", pods("a", 3), provisioner="obs-a")
    b = node("b", "m5.large", pods("b", 1), provisioner="obs-b")
    action = Action(Method.MULTI, (a, b))
    names = (
        "karpy_consolidation_action_saving_dollars_per_hour_sum",
        "karpy_consolidation_action_evicted_pods_sum",
    )
    before = {(n, p): sample(n, "multi-node", p) for n in names for p in ("obs-a", "obs-b")}
    observe_done(action)
    saved = {p: sample(names[0], "multi-node", p) - before[names[0], p] for p in ("obs-a", "obs-b")}
    evicted = {p: sample(names[1], "multi-node", p) - before[names[1], p] for p in ("obs-a", "obs-b")}
    assert saved == {"obs-a": pytest.approx(a.price), "obs-b": pytest.approx(b.price)}
    assert evicted == {"obs-a": 3, "obs-b": 1}
    count = "karpy_consolidation_action_evicted_pods_count"
    assert sample(count, "multi-node", "obs-a") >= 1


def test_the_cost_dashboard_charts_churn_against_savings() -> None:
    board = json.loads(DASHBOARD.read_text())
    (panel,) = [p for p in board["panels"] if p["title"] == "Consolidation: churn against savings"]
    exprs = " ".join(t["expr"] for t in panel["targets"])
    assert "karpy_consolidation_action_saving_dollars_per_hour_sum" in exprs
    assert "karpy_consolidation_action_evicted_pods_sum" in exprs
    assert len({p["id"] for p in board["panels"]}) == len(board["panels"])
