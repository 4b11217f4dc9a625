"""Issue 27's v1 disruption controls on the local control plane + moto, through the internal model:
the Provisioners are v1alpha5 CRs and the harness sets their v1 fields (`Karpy.v1`) as a NodePool
would load them; the lifecycle's clock is the harness's (`Karpy.clock`).

- a budget {nodes: "0", schedule: "@daily", duration: 10m} blocks consolidation inside its window
  (now = 00:02 UTC) and not outside it (00:12 UTC);
- a budget with `reasons: [Drifted]` holds drift and not emptiness;
- a pod annotated karpenter.sh/do-not-disrupt, or a node so annotated, keeps its node;
- a drain blocked by a PDB ends after the terminationGracePeriod.
Every wait is bounded."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from extender.api import labels as wk
from extender.api.disruption import DO_NOT_DISRUPT, Budget
from tests.integration.helpers import pod_manifest, unique, wait_for
from tests.integration.lifecycle_harness import (  # noqa: F401 (karpy is a fixture)
    Karpy,
    deployment,
    karpy,
    live_pods,
    messages,
    node_or_none,
)
from tests.integration.test_consolidation import SETTLE, consolidating, nodes_of, release, running_on, spread
from tests.integration.test_drift import patch_spec

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def fast(karpy: Karpy) -> Iterator[Karpy]:  # noqa: F811
    lifecycle = karpy.settings.lifecycle
    lifecycle.consolidation_interval_seconds = 1.0
    lifecycle.consolidation_validation_seconds = 2.0
    lifecycle.consolidation_min_node_age_seconds = 3.0
    lifecycle.resync_seconds = 2.0
    yield karpy
    karpy.clock.offset = type(karpy.clock.offset)()


def untouched(core: Any, names: list[str]) -> None:
    for name in names:
        node = node_or_none(core, name)
        assert node is not None and node.metadata.deletion_timestamp is None, f"{name} was disrupted"
        assert not node.spec.unschedulable, f"{name} was cordoned"


def test_scheduled_budget_blocks_consolidation_only_inside_its_window(
    fast: Karpy, core_v1: Any, apps_v1: Any, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="karpy")
    prov = unique("window")
    fast.v1[prov] = {"budgets": (Budget("100%"), Budget("0", schedule="@daily", duration=600))}
    fast.settings.lifecycle.consolidation_min_node_age_seconds = 3600
    consolidating(fast.kube, prov, budget="100%")
    two = spread(core_v1, apps_v1, namespace, prov, "half", 1, 2, "500m")
    try:
        fast.clock.stand_at(0, 2)  # inside [00:00, 00:10) UTC
        fast.settings.lifecycle.consolidation_min_node_age_seconds = 3.0
        release(core_v1, two)
        reason = "No allowed disruptions for disruption reason Underutilized due to blocking budget"
        blocked = f"{reason} (provisioner {prov})"
        wait_for(lambda: blocked in messages(caplog), 30, "consolidation held by the budget")
        time.sleep(6)  # several more passes (1 s interval, 2 s validation)
        untouched(core_v1, two)
        fast.clock.stand_at(0, 12)  # past the window: the budget no longer applies
        wait_for(lambda: len(nodes_of(core_v1, prov)) == 1, SETTLE, "one of the two nodes consolidated away")
        wait_for(lambda: len(running_on(core_v1, namespace, "half")) == 2, 60, "both pods Running")
    finally:
        fast.clock.offset = type(fast.clock.offset)()
        apps_v1.delete_namespaced_deployment("half", namespace)


def test_drifted_only_budget_holds_drift_not_emptiness(
    fast: Karpy, core_v1: Any, apps_v1: Any, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("DEBUG", logger="karpy.lifecycle")
    prov = unique("reasons")
    fast.v1[prov] = {"budgets": (Budget("0", reasons=frozenset({"Drifted"})),)}
    consolidating(fast.kube, prov, enabled=False, budget="100%", labels={"tier": "a"}, ttlSecondsAfterEmpty=3)
    kept = spread(core_v1, apps_v1, namespace, prov, "stay", 1, 1, "500m")[0]
    emptied = spread(core_v1, apps_v1, namespace, prov, "go", 1, 1, "500m")[0]
    release(core_v1, [kept, emptied])
    patch_spec(fast.kube, prov, {"labels": {"tier": "b"}})  # both nodes drift
    wait_for(
        lambda: f"Marked node {kept} drifted, ProvisionerDrifted (provisioner {prov})" in messages(caplog),
        60,
        "drift",
    )
    apps_v1.delete_namespaced_deployment("go", namespace)
    wait_for(lambda: node_or_none(core_v1, emptied) is None, 90, "the empty node deleted (Empty is not held)")
    waits = f"Drifted node {kept} waits for its Provisioner's disruption budget"
    wait_for(lambda: waits in messages(caplog), 30, "drift held by the Drifted budget")
    untouched(core_v1, [kept])
    # A Drifted budget of 1 lets the drifted node be replaced.
    fast.v1[prov] = {"budgets": (Budget("1", reasons=frozenset({"Drifted"})),)}
    wait_for(lambda: node_or_none(core_v1, kept) is None, SETTLE, "the drifted node replaced")
    wait_for(lambda: len(running_on(core_v1, namespace, "stay")) == 1, 60, "its pod Running elsewhere")
    apps_v1.delete_namespaced_deployment("stay", namespace)


def test_do_not_disrupt_pod_or_node_keeps_its_node(
    fast: Karpy, core_v1: Any, apps_v1: Any, namespace: str
) -> None:
    prov = unique("dnd")
    fast.settings.lifecycle.consolidation_min_node_age_seconds = 3600
    consolidating(fast.kube, prov, budget="100%")
    pinned = spread(
        core_v1, apps_v1, namespace, prov, "pin", 1, 1, "500m", annotations={DO_NOT_DISRUPT: "true"}
    )[0]
    guarded = spread(core_v1, apps_v1, namespace, prov, "guard", 1, 1, "500m")[0]
    ordinary = spread(core_v1, apps_v1, namespace, prov, "plain", 1, 1, "500m")[0]
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
    prov, grace = unique("tgp"), 15
    fast.v1[prov] = {"termination_grace_period": grace}
    consolidating(fast.kube, prov, enabled=False, budget="100%")
    template = pod_manifest("held", "500m", selector={wk.PROVISIONER_NAME: prov})
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
