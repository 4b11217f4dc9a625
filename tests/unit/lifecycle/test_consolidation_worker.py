"""The consolidation worker's acting half with fake API calls: budget slots, replacement before
drain, and a failed launch leaving the old node serving."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from extender.api.node import Node
from extender.api.pod import Pod
from extender.lifecycle.budgets import DisruptionLedger, nodes
from extender.lifecycle.consolidation import worker as worker_module
from extender.lifecycle.consolidation.decide import Action, Method, decide, simulate_removal
from extender.lifecycle.consolidation.worker import Consolidator
from extender.lifecycle.context import Context
from extender.settings import Settings
from tests import builders

from .test_consolidation import node, pod, pods, provisioner, view


class Marks:
    def __init__(self) -> None:
        self.marks: dict[str, str] = {}

    def mark_for_removal(self, node: str, reason: str) -> None:
        self.marks[node] = reason

    def unmark(self, node: str) -> None:
        self.marks.pop(node, None)


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def node(self, node: Any, reason: str, message: str, *, warning: bool = False) -> None:
        self.events.append((reason, message))


class Provisioning:
    def __init__(self, names: list[str] | Exception) -> None:
        self.names, self.calls = names, []

    def provision_replacements(self, pods: Any) -> list[str]:
        self.calls.append(list(pods))
        if isinstance(self.names, Exception):
            raise self.names
        return self.names


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    calls: dict[str, list[str]] = {"cordon": [], "uncordon": [], "delete": [], "ready": []}
    monkeypatch.setattr(worker_module, "cordon", lambda _kube, n: calls["cordon"].append(n) or True)
    monkeypatch.setattr(worker_module, "uncordon", lambda _kube, n: calls["uncordon"].append(n) or True)
    monkeypatch.setattr(worker_module.nodepatch, "delete_node", lambda _kube, n: calls["delete"].append(n))

    def get_node(_kube: Any, name: str) -> Node:
        calls["ready"].append(name)
        return builders.node(name, created=None, reason="", instance=None, provisioner=None)

    monkeypatch.setattr(worker_module.nodepatch, "get_node", get_node)
    return calls


def consolidator(provisioning: Provisioning | None) -> tuple[Consolidator, Marks, Recorder, DisruptionLedger]:
    marks, recorder, ledger = Marks(), Recorder(), DisruptionLedger()
    settings = Settings()
    settings.lifecycle.replacement_wait_seconds = 3.0
    ctx = Context(
        settings=settings,
        kube=None,
        cloud=None,  # type: ignore[arg-type]
        state=marks,
        provisioning=provisioning,  # type: ignore[arg-type]
        recorder=recorder,  # type: ignore[arg-type]
    )
    census = lambda _p: {"total": 10, "deleting": set()}  # noqa: E731
    return Consolidator(ctx, ledger, census, provisioners=lambda: []), marks, recorder, ledger


def replace_view() -> Any:
    return view(node("big", "m5.4xlarge", pods("p", 1)), provisioners=(provisioner(budget="100%"),))


def manifests(action: Any) -> dict[str, Pod]:
    """The pods on the nodes to replace, as the worker reads them from the API."""
    read = [builders.pod(p.name, namespace=p.namespace, uid="", image=None, live=True) for p in action.pods]
    return {pod.key: pod for pod in read}


def test_replacement_is_ready_before_the_old_node_is_deleted(api: dict[str, list[str]]) -> None:
    cluster = replace_view()
    action = decide(cluster)
    assert action is not None and len(action.replacements) == 1
    prov = Provisioning(["new-node"])
    worker, marks, recorder, ledger = consolidator(prov)
    assert worker.execute(action, {"big": Node("big")}, manifests(action), cluster, threading.Event())
    assert prov.calls and len(prov.calls[0]) == 1
    assert api["cordon"] == ["big"] and api["ready"] == ["new-node"] and api["delete"] == ["big"]
    assert marks.marks == {"big": "consolidation"} and ledger.held() == {"big": "consolidation"}
    assert recorder.events[0][0] == "Consolidating" and "→" in recorder.events[0][1]


@pytest.mark.parametrize("outcome", [[], RuntimeError("CreateFleet refused")], ids=["no-node", "error"])
def test_failed_launch_leaves_the_old_node_serving(api: dict[str, list[str]], outcome: Any) -> None:
    cluster = replace_view()
    action = decide(cluster)
    assert action is not None
    worker, marks, recorder, ledger = consolidator(Provisioning(outcome))
    assert not worker.execute(action, {"big": Node("big")}, manifests(action), cluster, threading.Event())
    assert api["cordon"] == ["big"] and api["uncordon"] == ["big"] and api["delete"] == []
    assert marks.marks == {} and ledger.held() == {}
    assert recorder.events[-1][0] == "ConsolidationFailed"


def test_no_slot_in_the_budget_means_no_action(api: dict[str, list[str]]) -> None:
    cluster = replace_view()
    action = decide(cluster)
    assert action is not None
    worker, marks, _, ledger = consolidator(Provisioning(["new"]))
    assert ledger.acquire("default", ["other"], "expired", allowed=nodes("100%"), total=1)
    worker.census = lambda _p: {"total": 1, "deleting": set()}
    assert not worker.execute(action, {}, manifests(action), cluster, threading.Event())
    assert api["cordon"] == [] and marks.marks == {}


# --- validation: a decision is acted on only if it comes out again after the delay ----------------


def validating(views: list[Any], monkeypatch: pytest.MonkeyPatch) -> tuple[Consolidator, list[Any]]:
    worker, _, _, _ = consolidator(Provisioning(["new"]))
    worker.ctx.settings.lifecycle.consolidation_validation_seconds = 0.0
    worker._provisioners = lambda: [provisioner(budget="100%")]
    seen = iter(views)
    monkeypatch.setattr(worker, "observe", lambda _p: (next(seen), {}))
    monkeypatch.setattr(worker, "report", lambda _v: None)
    monkeypatch.setattr(worker, "_pods_of", lambda _action: {})
    executed: list[Any] = []
    monkeypatch.setattr(worker, "execute", lambda action, *_: executed.append(action) or True)
    return worker, executed


def test_decision_unchanged_after_the_delay_is_executed(monkeypatch: pytest.MonkeyPatch) -> None:
    worker, executed = validating([replace_view(), replace_view()], monkeypatch)
    assert worker.reconcile(threading.Event()) is not None
    assert [a.names for a in executed] == [("big",)]


def test_decision_changed_during_validation_is_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Karpenter: 'should not consolidate if the action becomes invalid during the validation delay'."""
    busy = view(
        node("big", "m5.4xlarge", pods("p", 1)),
        provisioners=(provisioner(budget="100%"),),
        pending=(pods("new", 1)[0],),
    )
    worker, executed = validating([replace_view(), busy], monkeypatch)
    assert worker.reconcile(threading.Event()) is None
    assert executed == []


def test_gauges_show_cost_and_lower_bound_per_provisioner() -> None:
    from extender.lifecycle import metrics

    worker, _, _, _ = consolidator(None)
    cluster = replace_view()
    worker.report(cluster)
    cost = metrics.CLUSTER_COST.labels(provisioner="default")._value.get()
    bound = metrics.LOWER_BOUND_COST.labels(provisioner="default")._value.get()
    assert cost == cluster.nodes[0].price
    assert 0 < bound < cost


def test_a_slow_bound_stretches_the_gauge_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    """The gauge's bound shares the process with the extender: one taking 10 s is next computed
    200 s later (20x its cost), not after the usual 60 s."""
    from extender.lifecycle.consolidation import worker as module

    clock = [1000.0]
    monkeypatch.setattr(module.time, "monotonic", lambda: clock[0])
    solves: list[int] = []
    real = module.solve

    def slow(*args: Any, **kwargs: Any) -> Any:
        solves.append(1)
        clock[0] += 10.0
        return real(*args, **kwargs)

    monkeypatch.setattr(module, "solve", slow)
    worker, _, _, _ = consolidator(None)
    cluster = replace_view()
    worker.report(cluster)
    clock[0] += 100.0  # 110 s after the last report began: past 60 s, within 200 s
    worker.report(cluster)
    assert len(solves) == 1
    clock[0] += 100.0
    worker.report(cluster)
    assert len(solves) == 2


# --- several replacements (a re-plan into more than one node) ---------------------------------------


class Launches(Provisioning):
    """One outcome per provision_replacements call, in order."""

    def __init__(self, outcomes: list[list[str]]) -> None:
        super().__init__([])
        self.outcomes = iter(outcomes)

    def provision_replacements(self, pods: Any) -> list[str]:
        self.calls.append(list(pods))
        return next(self.outcomes)


def split() -> tuple[Any, Action]:
    """A large node re-planned onto two new nodes (as decide's re-plan method would)."""
    big = node("big", "m5.8xlarge", [pod("a", "500m"), pod("b", "500m"), pod("c", "3")])
    cluster = view(big, provisioners=(provisioner(budget="100%"),))
    new = simulate_removal(cluster, (big,)).nodes
    assert len(new) == 2
    return cluster, Action(Method.REPLAN, (big,), new)


def test_every_replacement_is_launched_and_ready_before_the_old_node_is_deleted(
    api: dict[str, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster, action = split()
    prov = Launches([["new-0"], ["new-1"]])
    worker, marks, _, ledger = consolidator(prov)
    polls: dict[str, int] = {}
    order: list[str] = []

    def get_node(_kube: Any, name: str) -> Node:
        polls[name] = polls.get(name, 0) + 1
        ready = name != "new-1" or polls[name] > 1  # new-1 is Ready only on the second poll
        order.append(f"{name}:{'ready' if ready else 'not-ready'}")
        return Node.from_live(
            {"metadata": {"name": name}, "status": {"conditions": [{"type": "Ready", "status": str(ready)}]}}
        )

    monkeypatch.setattr(worker_module.nodepatch, "get_node", get_node)
    monkeypatch.setattr(worker_module.nodepatch, "delete_node", lambda _k, n: order.append(f"delete:{n}"))
    monkeypatch.setattr(worker_module, "READY_POLL_SECONDS", 0.01)
    assert worker.execute(action, {"big": Node("big")}, manifests(action), cluster, threading.Event())
    # one provisioning call per planned node, each with that node's pods
    assert [sorted(p.name for p in call) for call in prov.calls] == [
        sorted(p.name for p in r.pods) for r in action.replacements
    ]
    assert order[-1] == "delete:big" and order[-3:-1] == ["new-0:ready", "new-1:ready"]
    assert "new-1:not-ready" in order and order.index("new-1:not-ready") < order.index("delete:big")
    assert marks.marks == {"big": "consolidation"} and ledger.held() == {"big": "consolidation"}


def test_one_failed_replacement_abandons_cleanly(api: dict[str, list[str]]) -> None:
    """The second launch fails: the first replacement (empty, nothing drained onto it) is deleted,
    the old node is uncordoned and keeps serving, its budget slot freed."""
    cluster, action = split()
    worker, marks, recorder, ledger = consolidator(Launches([["new-0"], []]))
    assert not worker.execute(action, {"big": Node("big")}, manifests(action), cluster, threading.Event())
    assert api["delete"] == ["new-0"] and api["uncordon"] == ["big"] and api["ready"] == []
    assert marks.marks == {} and ledger.held() == {}
    assert recorder.events[-1][0] == "ConsolidationFailed"
    assert "launching the replacement failed" in recorder.events[-1][1]
