"""Issue 27's v1 disruption controls on the local control plane + moto: every NodePool is a real
`karpenter.sh/v1` object with its `karpenter.k8s.aws/v1` EC2NodeClass (helpers.nodepool), validated
and defaulted by the API server and loaded by the lifecycle as `karpy controller` loads it, so its
spec.disruption (policy, consolidateAfter, budgets) and spec.template.spec.terminationGracePeriod
reach the lifecycle through the real loader. The pods select it with `karpenter.sh/nodepool`; the
lifecycle's clock is the harness's (`Karpy.clock`). The rules are Karpenter's (pkg/apis/v1/nodepool.go
GetAllowedDisruptionsByReason, node/termination/terminator eviction.go; unit-proven in
tests/unit/lifecycle/test_disruption_controls.py).

- a budget {nodes: "0", schedule: "@daily", duration: 10m} blocks consolidation inside its window
  (now = 00:02 UTC) and not outside it (00:12 UTC);
- a budget with `reasons: [Drifted]` holds drift and not emptiness;
- a pod annotated karpenter.sh/do-not-disrupt, or a node so annotated, keeps its node;
- a drain blocked by a PDB ends after the terminationGracePeriod;
- consolidateAfter: an emptied node stays until its last pod event is that old, then goes.
Every wait is bounded."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from extender.api import labels as wk
from extender.api.disruption import DO_NOT_DISRUPT
from tests.integration.helpers import nodepool, pod_manifest, unique, wait_for
from tests.integration.lifecycle_harness import (  # noqa: F401 (karpy is a fixture)
    Karpy,
    clock_ahead,
    deployment,
    karpy,
    live_pods,
    messages,
    node_or_none,
)
from tests.integration.test_consolidation import SETTLE, TYPES, nodes_of, release, running_on, spread

pytestmark = pytest.mark.integration

ON_DEMAND = [
    {"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
    {"key": wk.INSTANCE_TYPE, "operator": "In", "values": TYPES},
]
#: Pods and `spread` select the NodePool by its owner label.
POOL = {"owner_label": wk.NODEPOOL}


@pytest.fixture(scope="module")
def fast(karpy: Karpy) -> Iterator[Karpy]:  # noqa: F811
    lifecycle = karpy.settings.lifecycle
    lifecycle.consolidation_interval_seconds = 1.0
    lifecycle.consolidation_validation_seconds = 2.0
    lifecycle.consolidation_min_node_age_seconds = 3.0
    lifecycle.resync_seconds = 2.0
    yield karpy
    karpy.clock.offset = type(karpy.clock.offset)()


def pool(harness: Karpy, name: str, disruption: dict[str, Any], **fields: Any) -> None:
    """An on-demand NodePool of test_consolidation's TYPES with that spec.disruption; `fields`:
    helpers.nodepool's (template labels, template.spec fields)."""
    nodepool(harness.kube, name, harness.settings.cluster_name, ON_DEMAND, disruption=disruption, **fields)


def patch_disruption(kube: Any, name: str, disruption: dict[str, Any]) -> None:
    client.CustomObjectsApi(kube).patch_cluster_custom_object(
        "karpenter.sh", "v1", "nodepools", name, {"spec": {"disruption": disruption}}
    )


def untouched(core: Any, names: list[str]) -> None:
    for name in names:
        node = node_or_none(core, name)
        assert node is not None and node.metadata.deletion_timestamp is None, f"{name} was disrupted"
        assert not node.spec.unschedulable, f"{name} was cordoned"


def test_scheduled_budget_blocks_consolidation_only_inside_its_window(
    fast: Karpy, core_v1: Any, apps_v1: Any, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="karpy")
    name = unique("window")
    fast.settings.lifecycle.consolidation_min_node_age_seconds = 3600
    budgets = [{"nodes": "100%"}, {"nodes": "0", "schedule": "@daily", "duration": "10m"}]
    pool(
        fast,
        name,
        {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s", "budgets": budgets},
    )
    two = spread(core_v1, apps_v1, namespace, name, "half", 1, 2, "500m", **POOL)
    try:
        with clock_ahead(fast):
            fast.clock.stand_at(0, 2)  # inside [00:00, 00:10) UTC
            fast.settings.lifecycle.consolidation_min_node_age_seconds = 3.0
            release(core_v1, two)
            reason = "No allowed disruptions for disruption reason Underutilized due to blocking budget"
            blocked = f"{reason} (nodepool {name})"
            wait_for(lambda: blocked in messages(caplog), 30, "consolidation held by the budget")
            time.sleep(6)  # several more passes (1 s interval, 2 s validation)
            untouched(core_v1, two)
            fast.clock.stand_at(0, 12)  # past the window: the budget no longer applies
            wait_for(
                lambda: len(nodes_of(core_v1, name, wk.NODEPOOL)) == 1,
                SETTLE,
                "one of the two nodes consolidated away",
            )
            wait_for(lambda: len(running_on(core_v1, namespace, "half")) == 2, 60, "both pods Running")
    finally:
        apps_v1.delete_namespaced_deployment("half", namespace)


def test_drifted_only_budget_holds_drift_not_emptiness(
    fast: Karpy, core_v1: Any, apps_v1: Any, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("DEBUG", logger="karpy.lifecycle")
    name = unique("reasons")
    when_empty = {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "3s"}
    pool(
        fast, name, {**when_empty, "budgets": [{"nodes": "0", "reasons": ["Drifted"]}]}, labels={"tier": "a"}
    )
    kept = spread(core_v1, apps_v1, namespace, name, "stay", 1, 1, "500m", **POOL)[0]
    emptied = spread(core_v1, apps_v1, namespace, name, "go", 1, 1, "500m", **POOL)[0]
    release(core_v1, [kept, emptied])
    client.CustomObjectsApi(fast.kube).patch_cluster_custom_object(  # both nodes drift
        "karpenter.sh",
        "v1",
        "nodepools",
        name,
        {"spec": {"template": {"metadata": {"labels": {"tier": "b"}}}}},
    )
    wait_for(
        lambda: f"Marked node {kept} drifted, NodePoolDrifted (nodepool {name})" in messages(caplog),
        60,
        "drift",
    )
    apps_v1.delete_namespaced_deployment("go", namespace)
    wait_for(lambda: node_or_none(core_v1, emptied) is None, 90, "the empty node deleted (Empty is not held)")
    waits = f"Drifted node {kept} waits for its Provisioner's disruption budget"
    wait_for(lambda: waits in messages(caplog), 30, "drift held by the Drifted budget")
    untouched(core_v1, [kept])
    # A Drifted budget of 1, patched on the NodePool, lets the drifted node be replaced.
    patch_disruption(fast.kube, name, {**when_empty, "budgets": [{"nodes": "1", "reasons": ["Drifted"]}]})
    wait_for(lambda: node_or_none(core_v1, kept) is None, SETTLE, "the drifted node replaced")
    wait_for(lambda: len(running_on(core_v1, namespace, "stay")) == 1, 60, "its pod Running elsewhere")
    apps_v1.delete_namespaced_deployment("stay", namespace)


def test_do_not_disrupt_pod_or_node_keeps_its_node(
    fast: Karpy, core_v1: Any, apps_v1: Any, namespace: str
) -> None:
    name = unique("dnd")
    fast.settings.lifecycle.consolidation_min_node_age_seconds = 3600
    budgets = [{"nodes": "100%"}]
    pool(
        fast,
        name,
        {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s", "budgets": budgets},
    )
    pinned = spread(
        core_v1, apps_v1, namespace, name, "pin", 1, 1, "500m", annotations={DO_NOT_DISRUPT: "true"}, **POOL
    )[0]
    guarded = spread(core_v1, apps_v1, namespace, name, "guard", 1, 1, "500m", **POOL)[0]
    ordinary = spread(core_v1, apps_v1, namespace, name, "plain", 1, 1, "500m", **POOL)[0]
    core_v1.patch_node(guarded, {"metadata": {"annotations": {DO_NOT_DISRUPT: "true"}}})
    release(core_v1, [pinned, guarded, ordinary])
    fast.settings.lifecycle.consolidation_min_node_age_seconds = 3.0
    wait_for(lambda: node_or_none(core_v1, ordinary) is None, SETTLE, "the ordinary node consolidated away")
    time.sleep(8)  # several more passes must leave the protected nodes alone
    untouched(core_v1, [pinned, guarded])
    for app in ("pin", "guard", "plain"):
        apps_v1.delete_namespaced_deployment(app, namespace)


def test_pdb_blocked_drain_ends_after_termination_grace_period(
    fast: Karpy, core_v1: Any, apps_v1: Any, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="karpy")
    name, grace = unique("tgp"), 15
    # Never: nothing but the test's own delete takes the node.
    pool(
        fast,
        name,
        {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"},
        terminationGracePeriod=f"{grace}s",
    )
    template = pod_manifest("held", "500m", selector={wk.NODEPOOL: name})
    template["metadata"] = {"labels": {"app": "held"}}
    template["spec"]["terminationGracePeriodSeconds"] = 2
    apps_v1.create_namespaced_deployment(
        namespace,
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "held"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "held"}}, "template": template},
        },
    )
    client.PolicyV1Api(fast.kube).create_namespaced_pod_disruption_budget(
        namespace,
        {
            "metadata": {"name": "held"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "held"}}},
        },
    )
    placed = wait_for(lambda: running_on(core_v1, namespace, "held"), SETTLE, "the pod Running")
    ((pod_name, node_name),) = placed.items()
    wait_for(
        lambda: any(
            p.metadata.name == pod_name
            and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
            for p in live_pods(core_v1, namespace, "held")
        ),
        60,
        "the pod Ready (the PDB then allows no eviction)",
    )
    core_v1.delete_node(node_name)
    started = time.monotonic()
    wait_for(
        lambda: f"Failed to evict pod {namespace}/{pod_name} due to PDB violation." in messages(caplog),
        30,
        "PDB block",
    )
    # Held until deadline - the pod's own 2 s grace.
    time.sleep(max(grace - 2 - 3 - (time.monotonic() - started), 0))
    assert node_or_none(core_v1, node_name) is not None, "the node went before its terminationGracePeriod"
    wait_for(lambda: node_or_none(core_v1, node_name) is None, 60, "the node deleted after its deadline")
    ended = time.monotonic() - started
    assert ended >= grace - 2 - 1, f"the drain ended after {ended:.1f}s, before the deadline"
    assert any(
        m.startswith(f"Deleted pod {namespace}/{pod_name} to meet the termination deadline")
        for m in messages(caplog)
    )
    apps_v1.delete_namespaced_deployment("held", namespace)


def test_consolidate_after_keeps_an_emptied_node_until_its_last_pod_event_is_that_old(
    fast: Karpy, core_v1: Any, apps_v1: Any, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """WhenEmptyOrUnderutilized with consolidateAfter: consolidation takes a node only once its last
    pod event (here the deletion of its only pod) is consolidateAfter old (Karpenter v1's
    Consolidatable condition, pkg/controllers/nodeclaim/disruption/consolidation.go)."""
    caplog.set_level("DEBUG", logger="karpy.controller.provisioning")
    name, after = unique("after"), 12
    disruption = {
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
        "consolidateAfter": f"{after}s",
        "budgets": [{"nodes": "100%"}],
    }
    pool(fast, name, disruption)
    deployment(apps_v1, namespace, "brief", name, 1, cpu="500m", **POOL)
    placed = wait_for(lambda: running_on(core_v1, namespace, "brief"), SETTLE, "the pod Running")
    (node_name,) = placed.values()
    # The pod's deletion, the node's last pod event, comes after this instant.
    started = time.monotonic()
    apps_v1.delete_namespaced_deployment("brief", namespace)
    wait_for(lambda: not live_pods(core_v1, namespace, "brief"), 30, "the pod deleted")
    time.sleep(max(after - 3 - (time.monotonic() - started), 0))  # passes every 1 s find it too recent
    untouched(core_v1, [node_name])
    wait_for(lambda: node_or_none(core_v1, node_name) is None, 40, "the emptied node consolidated away")
    gone = time.monotonic() - started
    assert gone >= after, f"the node went {gone:.1f}s after its pod's deletion, before consolidateAfter"
    # Its termination left the NodePool's status to the v1 status pass: no Provisioner patch (404).
    assert not [m for m in messages(caplog) if m.startswith(f"Failed to update status of provisioner {name}")]
