"""`karpy explain node` and consolidation's verdict on the local control plane + moto (issue 34).

Two nodes of a karpenter.sh/v1 NodePool (consolidating, `karpy.sh/consolidation-min-savings` of
$10/h so that no move is ever worth it and the nodes stay through every step), each with one pod;
with nothing else blocking, node A's verdict is that saving below the threshold (SavingBelowThreshold,
in the words `karpy explain node` gives its best move).
One blocker at a time is put on node A, then lifted: a PDB allowing 0 disruptions, a
karpenter.sh/do-not-disrupt pod, consolidateAfter not yet elapsed (then skipped with the harness's
clock), a budget of 0 nodes and one of 0 in a schedule window, a pending pod, a launching node.
For each, `karpy explain node A -o json`, run live through the cluster adapters, names it with its
numbers, and the NodeClaim's `Consolidatable` condition says it (Karpenter v1's condition type,
pkg/apis/v1/nodeclaim_status.go; its reason `Unconsolidatable` Event, pkg/controllers/disruption/
events). At the end the Node's Events are exactly one per change seen, each with count 1, though
the consolidation worker passed every second in between; a fresh writer (a restart) writes nothing.
The lifecycle runs in this process (lifecycle_harness); every wait is bounded.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes import client

from extender.api import labels as wk
from extender.api.disruption import DO_NOT_DISRUPT
from extender.cluster.nodeclaims import Tracker
from extender.lifecycle.consolidation import eligibility, verdict, worth
from extender.lifecycle.consolidation.decide import decide
from extender.lifecycle.consolidation.eligibility import Blocker
from extender.lifecycle.consolidation.verdict_writer import VerdictWriter
from extender.lifecycle.consolidation.worker import refusals
from tests.integration.helpers import karpy_cli_json, nodepool, pod_manifest, unique, wait_for
from tests.integration.lifecycle_harness import (  # noqa: F401 (karpy is a fixture)
    Karpy,
    clock_ahead,
    karpy,
    live_pods,
    node_or_none,
)
from tests.integration.test_consolidation import release, spread
from tests.integration.test_disruption_controls import (  # noqa: F401 (fast is a fixture)
    ON_DEMAND,
    POOL,
    fast,
    patch_disruption,
)

pytestmark = pytest.mark.integration

#: Several consolidation passes (one a second) with nothing changed.
QUIET = 4.0
STEP = 60
ALWAYS = {"nodes": "100%"}


def explain(cluster: Any, monkeypatch: pytest.MonkeyPatch, capsys: Any, node: str) -> dict[str, Any]:
    return dict(karpy_cli_json(cluster, monkeypatch, capsys, "explain", "node", node))


def condition(kube: Any, node: str) -> dict[str, Any] | None:
    """The Consolidatable condition of the NodeClaim of `node`."""
    claims = client.CustomObjectsApi(kube).list_cluster_custom_object("karpenter.sh", "v1", "nodeclaims")
    for claim in claims["items"]:
        status = claim.get("status") or {}
        if status.get("nodeName") == node:
            return next((c for c in status.get("conditions") or () if c["type"] == "Consolidatable"), None)
    return None


def verdict_events(core: Any, node: str) -> list[tuple[str, str, int]]:
    """(reason, message, count) of the verdict Events on `node` (cluster-scoped: in `default`)."""
    found = core.list_namespaced_event("default", field_selector=f"involvedObject.name={node}").items
    return [
        (e.reason, e.message, e.count or 1)
        for e in found
        if e.reason in (verdict.CONSOLIDATABLE, verdict.UNCONSOLIDATABLE)
    ]


class Watcher:
    """Waits for node A's condition to reach a verdict, and keeps every verdict seen."""

    def __init__(self, kube: Any, node: str) -> None:
        self.kube, self.node = kube, node
        self.seen: list[dict[str, Any]] = []

    def reaches(self, status: str, reason: str) -> dict[str, Any]:
        found = wait_for(
            lambda: (
                (c := condition(self.kube, self.node))
                and c["status"] == status
                and c["reason"] == reason
                and c
            ),
            STEP,
            f"Consolidatable={status} ({reason}) on the claim of {self.node}",
        )
        self.seen.append(found)
        return dict(found)


def set_annotations(kube: Any, name: str, annotations: dict[str, Any]) -> None:
    client.CustomObjectsApi(kube).patch_cluster_custom_object(
        "karpenter.sh", "v1", "nodepools", name, {"metadata": {"annotations": annotations}}
    )


def test_explain_node_names_each_blocker_and_the_claim_and_node_say_it_once_per_change(
    fast: Karpy,  # noqa: F811
    cluster: Any,
    core_v1: Any,
    apps_v1: Any,
    namespace: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    name = unique("why")
    fast.settings.lifecycle.consolidation_min_node_age_seconds = 3600
    disruption = {
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
        "consolidateAfter": "0s",
        "budgets": [ALWAYS],
    }
    nodepool(fast.kube, name, fast.settings.cluster_name, ON_DEMAND, disruption=disruption)
    set_annotations(fast.kube, name, {"karpy.sh/consolidation-min-savings": "10"})
    node_a = spread(core_v1, apps_v1, namespace, name, "a", 1, 1, "500m", **POOL)[0]
    node_b = spread(core_v1, apps_v1, namespace, name, "b", 1, 1, "500m", **POOL)[0]
    release(core_v1, [node_a, node_b])
    fast.settings.lifecycle.consolidation_min_node_age_seconds = 3.0
    why: Callable[[], dict[str, Any]] = lambda: explain(cluster, monkeypatch, capsys, node_a)  # noqa: E731
    watch = Watcher(fast.kube, node_a)

    # Nothing blocks A; its move (delete it, B takes its pod) saves below the pool's $10/h.
    first = watch.reaches("False", worth.BELOW_THRESHOLD)
    # Live, the CLI reads the minimum node age from its environment, as the harness's lifecycle (3 s).
    monkeypatch.setenv("KARPY_LIFECYCLE_CONSOLIDATION_MIN_NODE_AGE_SECONDS", "3")
    found = wait_for(lambda: (e := why())["blockers"] == [] and e, STEP, "A past 3 s, live")
    assert found["bestMove"]["kind"] == "delete"
    assert re.fullmatch(
        rf"saving \$0\.\d+/h is below nodepool {name}'s consolidation-min-savings"
        r" \(\$10/h and 0%: \$10\.000/h here\)",
        found["bestMove"]["refusal"],
    ), found
    assert first["message"] == found["bestMove"]["refusal"]  # the same words on the claim
    time.sleep(QUIET)
    assert condition(fast.kube, node_a) == first, "rewritten with nothing changed"
    # Before the first refusal a pass may have seen A younger than the minimum age, or with nothing
    # blocking and no move of A simulated yet (Consolidatable; B not yet able to take its pod, or the
    # pass stopped before A): once each. Any later one is a change the assertions below count.
    early = Counter(
        e
        for e in verdict_events(core_v1, node_a)
        if e[1].startswith("node is ") or e[0] == verdict.CONSOLIDATABLE
    )
    assert all(count == 1 for _, _, count in early), early
    assert all(r == verdict.UNCONSOLIDATABLE for r, m, _ in early if m.startswith("node is ")), early
    assert Counter(verdict_events(core_v1, node_a)) - early == Counter(
        [("Unconsolidatable", first["message"], 1)]
    )

    # A PDB that allows no disruption.
    policy = client.PolicyV1Api(fast.kube)
    policy.create_namespaced_pod_disruption_budget(
        namespace,
        {
            "metadata": {"name": "a-pdb"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "a"}}},
        },
    )
    pdb = f"pdb {namespace}/a-pdb prevents pod evictions (it allows 0 disruptions)"
    held = watch.reaches("False", "PodDisruptionBudget")
    assert held["message"] == pdb
    assert why()["blockers"] == [pdb] and why()["reasons"] == ["PodDisruptionBudget"]
    time.sleep(QUIET)
    assert condition(fast.kube, node_a) == held
    assert Counter(verdict_events(core_v1, node_a)) - early == Counter(
        [("Unconsolidatable", first["message"], 1), ("Unconsolidatable", pdb, 1)]
    )
    policy.delete_namespaced_pod_disruption_budget("a-pdb", namespace)
    watch.reaches("False", worth.BELOW_THRESHOLD)

    # A karpenter.sh/do-not-disrupt pod.
    (pod,) = live_pods(core_v1, namespace, "a")
    core_v1.patch_namespaced_pod(
        pod.metadata.name, namespace, {"metadata": {"annotations": {DO_NOT_DISRUPT: "true"}}}
    )
    pinned = f"pod {namespace}/{pod.metadata.name} has {DO_NOT_DISRUPT} annotation"
    assert watch.reaches("False", "DoNotDisruptPod")["message"] == pinned
    assert why()["blockers"] == [pinned]
    core_v1.patch_namespaced_pod(
        pod.metadata.name, namespace, {"metadata": {"annotations": {DO_NOT_DISRUPT: None}}}
    )
    watch.reaches("False", worth.BELOW_THRESHOLD)

    # consolidateAfter not yet elapsed; then skipped with the lifecycle's clock.
    patch_disruption(fast.kube, name, {**disruption, "consolidateAfter": "1h"})
    message = watch.reaches("False", "ConsolidateAfter")["message"]
    assert re.fullmatch(
        r"its last pod event was \d+s ago, more recent than consolidateAfter \(3600s, \d+s left\)", message
    )
    (live,) = why()[
        "blockers"
    ]  # live, it counts from the node's creation (the pod events are the controller's)
    assert re.fullmatch(
        r"its last pod event was \d+s ago, more recent than consolidateAfter \(3600s, \d+s left\)", live
    )
    with clock_ahead(fast):
        fast.clock.offset = timedelta(hours=2)
        watch.reaches("False", worth.BELOW_THRESHOLD)
        patch_disruption(fast.kube, name, disruption)
        time.sleep(QUIET)  # the worker reads consolidateAfter 0s before the clock goes back

    # A budget of 0 nodes, then 0 in a schedule window open now (real time: the CLI's clock).
    patch_disruption(fast.kube, name, {**disruption, "budgets": [{"nodes": "0"}]})
    budget = watch.reaches("False", "DisruptionBudget")
    zero = (
        "the disruption budget allows no more Underutilized disruptions now (nodes 0 of 2 node(s);"
        " 0 already being disrupted)"
    )
    assert budget["message"] == zero and why()["blockers"] == [zero]
    now = datetime.now(UTC)
    cron = f"{now.minute} {now.hour} * * *"
    patch_disruption(
        fast.kube,
        name,
        {**disruption, "budgets": [ALWAYS, {"nodes": "0", "schedule": cron, "duration": "10m"}]},
    )
    window = (
        f"the disruption budget allows no more Underutilized disruptions now (nodes 100%, nodes 0 during"
        f" {cron!r} for 600s of 2 node(s); 0 already being disrupted)"
    )
    wait_for(lambda: why()["blockers"] == [window], STEP, "the window named live")
    time.sleep(QUIET)
    assert condition(fast.kube, node_a) == budget, "the same reason with other numbers is no change"
    patch_disruption(fast.kube, name, disruption)
    watch.reaches("False", worth.BELOW_THRESHOLD)

    # A pod pending for the pool (no type it allows holds 100 CPU).
    huge = pod_manifest("huge", "100", selector={wk.NODEPOOL: name})
    core_v1.create_namespaced_pod(namespace, huge)
    waiting = f"1 pod(s) pending for it ({namespace}/huge)"
    assert watch.reaches("False", "PodsPending")["message"] == waiting
    assert why()["blockers"] == [waiting]
    core_v1.delete_namespaced_pod("huge", namespace, grace_period_seconds=0)
    watch.reaches("False", worth.BELOW_THRESHOLD)

    # A node of the pool still launching: not Ready (no kubelet plays it), moments old.
    launching = unique("launching")
    core_v1.create_node({"metadata": {"name": launching, "labels": {wk.NODEPOOL: name}}})
    try:
        coming = f"1 node(s) still launching ({launching})"
        assert watch.reaches("False", "NodesLaunching")["message"] == coming
        assert why()["blockers"] == [coming]
    finally:
        core_v1.delete_node(launching)
        wait_for(
            lambda: (
                node_or_none(core_v1, launching) is None
                or core_v1.patch_node(launching, {"metadata": {"finalizers": None}}) is None
            ),
            STEP,
            "the launching node gone",
        )
    watch.reaches("False", worth.BELOW_THRESHOLD)
    time.sleep(QUIET)

    # One Event per change seen, each once (count 1), in the condition's words.
    assert len(watch.seen) == 13  # below the threshold, then each of the six blockers and below again
    expected = Counter(
        (verdict.CONSOLIDATABLE if c["status"] == "True" else verdict.UNCONSOLIDATABLE, c["message"], 1)
        for c in watch.seen
    )
    assert Counter(verdict_events(core_v1, node_a)) - early == expected

    # A restart: a fresh writer, comparing with the claims, writes and announces nothing.
    consolidator = fast.lifecycle.consolidator if fast.lifecycle else None
    assert consolidator is not None
    view, nodes = consolidator.observe(consolidator._provisioners())
    announced: list[str] = []
    fresh = VerdictWriter(
        Tracker(fast.kube, fast.clock), lambda node, reason, message: announced.append(node.name)
    )
    # The pass's verdicts: its blockers, and what its decision judged not worth it.
    assessment = eligibility.assess(view, consolidator.settings)
    judged: dict[str, Blocker | None] = {}
    decide(view, consolidator.settings, assessment.candidates, judged)
    refused = refusals({}, judged, assessment)
    everyone = verdict.verdicts(view, consolidator.settings, assessment, refused)
    ours = {n: v for n, v in everyone.items() if n in (node_a, node_b)}
    assert set(ours) == {node_a, node_b}
    assert fresh.write(ours, nodes, view.provisioner) == [] and announced == []
    for app in ("a", "b"):
        apps_v1.delete_namespaced_deployment(app, namespace)
