"""Node repair on the local control plane + moto (issue 35): a node that was Ready and then reports an
EKS node-monitoring-agent condition False past its toleration is replaced at once, its PDB bypassed
(Karpenter's node health controller force-terminates); a pool with more than 20 % of its nodes
unhealthy is not repaired, and says so with a NodeRepairBlocked Event.

Two ways to make a node unhealthy:
- an agent condition written on the Node's status as the agent would, its lastTransitionTime 31
  minutes back, so the 30-minute toleration (Karpenter AWS `RepairPolicies`) has run out;
- a real NotReady: the node's `karpy.sh/managed` label removed, so kwok (the kubelet of labelled
  nodes only, hack/localcluster/kwok-stages.yaml) stops renewing its Lease, and
  kube-controller-manager's node-lifecycle-controller marks it Ready=Unknown after its
  --node-monitor-grace-period (the local cluster's 25 s, hack/localcluster/cluster.py
  NODE_MONITOR_GRACE: five of kwok's 5 s Lease renewals, as the default 50 s is five of a kubelet's
  10 s). The lifecycle's clock then stands 31 minutes ahead (clock_ahead) instead of waiting out
  the toleration.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes import client

from extender.api import labels as wk
from hack.localcluster.cluster import MANAGED_LABEL
from tests.integration import lifecycle_harness
from tests.integration.helpers import unique, wait_for
from tests.integration.lifecycle_harness import (
    Karpy,
    available,
    bound_node,
    clock_ahead,
    deployment,
    instance_of,
    instance_state,
    live_pods,
    messages,
    node_or_none,
    provisioner,
    ready_untainted,
)

pytestmark = pytest.mark.integration

karpy = lifecycle_harness.karpy
lifecycle_log = lifecycle_harness.lifecycle_log

ON_DEMAND = [{"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}]
#: Past the 30-minute toleration of Ready=Unknown (Karpenter AWS RepairPolicies).
PAST_TOLERATION = timedelta(minutes=31)
#: The local cluster's --node-monitor-grace-period (25 s) after kwok's last Lease renewal, plus
#: kube-controller-manager's 5 s node-monitor-period and slack for a loaded machine: a hang guard.
UNKNOWN_WITHIN = 150


@pytest.fixture
def repairing(karpy: Karpy) -> Iterator[Karpy]:
    karpy.settings.lifecycle.node_repair = True
    try:
        yield karpy
    finally:
        karpy.settings.lifecycle.node_repair = False


def report_condition(core: Any, node: str, kind: str, status: str, minutes_ago: float) -> None:
    """Write `kind`=`status` on the node's status, as the node monitoring agent would."""
    since = (datetime.now(UTC) - timedelta(minutes=minutes_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    condition = {
        "type": kind,
        "status": status,
        "reason": "KernelBug",
        "message": "injected by the test",
        "lastHeartbeatTime": since,
        "lastTransitionTime": since,
    }
    core.patch_node_status(node, {"status": {"conditions": [condition]}})


@pytest.fixture
def repairing_ahead(repairing: Karpy) -> Iterator[Karpy]:
    """Repair on, and the lifecycle's clock free to stand ahead (clock_ahead). The worker requeues
    an unhealthy node for the end of its toleration in real time, so after the clock jumps a resync
    (every 2 s here) is what looks at it again, as Karpenter's requeue would at that moment."""
    lifecycle = repairing.settings.lifecycle
    saved = lifecycle.resync_seconds
    lifecycle.resync_seconds = 2.0
    try:
        with clock_ahead(repairing):
            yield repairing
    finally:
        lifecycle.resync_seconds = saved


def silence(core: Any, node: str) -> None:
    """Stop kwok heartbeating the node: it manages only nodes carrying MANAGED_LABEL."""
    core.patch_node(node, {"metadata": {"labels": {MANAGED_LABEL: None}}})


def revive(core: Any, node: str) -> None:
    core.patch_node(node, {"metadata": {"labels": {MANAGED_LABEL: "true"}}})


def ready_status(core: Any, node: str) -> str | None:
    found = node_or_none(core, node)
    conditions = found.status.conditions or [] if found is not None else []
    return next((c.status for c in conditions if c.type == "Ready"), None)


def events_of(core: Any, reason: str, nodes: list[str]) -> list[Any]:
    found = core.list_event_for_all_namespaces(field_selector=f"reason={reason}").items
    return [e for e in found if e.involved_object.kind == "Node" and e.involved_object.name in nodes]


def two_on_a_node(karpy: Karpy, core: Any, apps: Any, namespace: str, app: str) -> tuple[str, str]:
    """A new Provisioner and 2 pods of `app` on one node of it, Ready; (node, its instance)."""
    prov = unique(app)
    provisioner(karpy.kube, prov, ON_DEMAND)
    deployment(apps, namespace, app, prov, 2, cpu="500m")
    node = bound_node(core, namespace, app)
    wait_for(lambda: ready_untainted(core, node) and available(core, namespace, app) == 2, 60, f"{app} up")
    return node, instance_of(core.read_node(node))


def replaced(karpy: Karpy, core: Any, namespace: str, app: str, node: str, instance: str) -> None:
    """Wait until `node` is deleted, its instance terminated and `app`'s 2 pods are on another node."""
    wait_for(lambda: node_or_none(core, node) is None, 60, f"{node} deleted")
    wait_for(lambda: instance_state(karpy, instance) == "terminated", 30, "its instance terminated")

    def moved() -> bool:
        pods = live_pods(core, namespace, app)
        return len(pods) == 2 and all(p.spec.node_name not in (None, node) for p in pods)

    wait_for(moved, 90, f"{app}'s pods on a new node")


def apart(core: Any, apps: Any, namespace: str, app: str, prov: str, count: int) -> list[str]:
    """`count` pods of `app`, one per node (hostname anti-affinity); their nodes, once all Ready."""
    spread = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": wk.HOSTNAME, "labelSelector": {"matchLabels": {"app": app}}}
            ]
        }
    }
    deployment(apps, namespace, app, prov, count, cpu="500m", affinity=spread)
    nodes: list[str] = wait_for(
        lambda: (
            (ps := live_pods(core, namespace, app))
            and len({p.spec.node_name for p in ps if p.spec.node_name}) == count
            and sorted({p.spec.node_name for p in ps})
        ),
        120,
        f"{app} on {count} nodes",
    )
    for node in nodes:
        wait_for(lambda node=node: ready_untainted(core, node), 60, f"{node} Ready")
    return nodes


def carries(core: Any, node: str, kind: str) -> bool:
    found = node_or_none(core, node)
    return found is not None and any(c.type == kind for c in found.status.conditions or [])


def pdb(kube: Any, namespace: str, app: str) -> None:
    client.PolicyV1Api(kube).create_namespaced_pod_disruption_budget(
        namespace,
        {
            "metadata": {"name": app},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": app}}},
        },
    )


def test_an_unhealthy_node_is_replaced_past_its_toleration_bypassing_its_pdb(
    repairing: Karpy, core_v1: Any, apps_v1: Any, namespace: str, lifecycle_log: pytest.LogCaptureFixture
) -> None:
    node, instance = two_on_a_node(repairing, core_v1, apps_v1, namespace, "web")
    pdb(repairing.kube, namespace, "web")  # no voluntary eviction is allowed

    report_condition(core_v1, node, "KernelReady", "False", minutes_ago=31)
    assert carries(core_v1, node, "KernelReady"), "the condition was not kept on the Node"
    replaced(repairing, core_v1, namespace, "web", node, instance)
    log = messages(lifecycle_log)
    assert f"Triggering termination for unhealthy node {node} (KernelReady=False for more than 30m)" in log
    assert any(m.startswith("Deleted pod ") and f"of node {node}" in m for m in log), "PDB not bypassed"


def test_a_pool_with_too_many_unhealthy_nodes_is_not_repaired(
    repairing: Karpy, core_v1: Any, apps_v1: Any, namespace: str, lifecycle_log: pytest.LogCaptureFixture
) -> None:
    prov = unique("sick")
    provisioner(repairing.kube, prov, ON_DEMAND)
    nodes = apart(core_v1, apps_v1, namespace, "apart", prov, 2)
    # 2 of 2 unhealthy: more than 20 % (rounded up: 1) of the pool. Both conditions are written while
    # neither toleration has run out (29 min 55 s back): written already due, the first node was
    # repaired before the second reported, when 1 of 2 was still within the 20 % (a CI run).
    for node in nodes:
        report_condition(core_v1, node, "NetworkingReady", "False", minutes_ago=29 + 55 / 60)

    def blocked() -> list[Any]:
        events = core_v1.list_event_for_all_namespaces(field_selector="reason=NodeRepairBlocked").items
        return [e for e in events if e.involved_object.name in nodes]

    found = wait_for(blocked, 60, "NodeRepairBlocked Event")
    assert "2 of 2 nodes" in found[0].message and "more than 20%" in found[0].message, found[0].message
    assert all(
        node_or_none(core_v1, n) is not None and not node_or_none(core_v1, n).metadata.deletion_timestamp
        for n in nodes
    )
    assert not any(
        m.startswith("Triggering termination for unhealthy node") and prov in m
        for m in messages(lifecycle_log)
    )


def test_a_node_left_not_ready_is_replaced_past_its_toleration(
    repairing_ahead: Karpy,
    core_v1: Any,
    apps_v1: Any,
    namespace: str,
    lifecycle_log: pytest.LogCaptureFixture,
) -> None:
    karpy = repairing_ahead
    node, instance = two_on_a_node(karpy, core_v1, apps_v1, namespace, "lost")
    silence(core_v1, node)
    t0 = time.monotonic()
    wait_for(lambda: ready_status(core_v1, node) == "Unknown", UNKNOWN_WITHIN, f"{node} Ready=Unknown")
    unknown_after = time.monotonic() - t0
    time.sleep(5)  # a few resyncs: within its toleration the node stays
    still = node_or_none(core_v1, node)
    assert still is not None and still.metadata.deletion_timestamp is None, "repaired within its toleration"

    karpy.clock.offset = PAST_TOLERATION
    t0 = time.monotonic()
    replaced(karpy, core_v1, namespace, "lost", node, instance)
    replaced_in = time.monotonic() - t0
    what = "Ready=Unknown for more than 30m"
    assert f"Triggering termination for unhealthy node {node} ({what})" in messages(lifecycle_log)
    found = events_of(core_v1, "Unhealthy", [node])
    assert [e.message for e in found] == [f"Repairing node: {what}, replaced without waiting for its drain"]
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"NotReady repair: Ready=Unknown {unknown_after:.1f}s after kwok stopped,"
        f" replaced in {replaced_in:.1f}s (load {load})"
    )


def test_three_of_five_not_ready_nodes_wait_until_one_is_left(
    repairing_ahead: Karpy,
    core_v1: Any,
    apps_v1: Any,
    namespace: str,
    lifecycle_log: pytest.LogCaptureFixture,
) -> None:
    """Karpenter's node health controller (kubernetes-sigs/karpenter
    pkg/controllers/node/health/controller.go, `isNodePoolHealthy` -> `areNodesHealthy`): of a
    NodePool's nodes, `allowedUnhealthyPercent` (20 %) scaled rounding up may be unhealthy, 1 of 5;
    with more, it repairs none of them and publishes NodeRepairBlocked on each ("more than 20% nodes
    are unhealthy in the nodepool"). So 3 of 5 NotReady: none repaired (the issue's "only 1 is
    repaired" is not Karpenter's rule). Once two recover, 1 of 5 is within the 20 %: that one is."""
    karpy = repairing_ahead
    prov = unique("five")
    provisioner(karpy.kube, prov, ON_DEMAND)
    nodes = apart(core_v1, apps_v1, namespace, "five", prov, 5)
    sick, healed, left = nodes[:3], nodes[:2], nodes[2]
    for node in sick:
        silence(core_v1, node)
    for node in sick:
        wait_for(
            lambda node=node: ready_status(core_v1, node) == "Unknown", UNKNOWN_WITHIN, f"{node} Unknown"
        )

    karpy.clock.offset = PAST_TOLERATION  # all three past their toleration at once
    found = wait_for(
        lambda: (
            (found := events_of(core_v1, "NodeRepairBlocked", sick))
            and {e.involved_object.name for e in found} == set(sick)
            and found
        ),
        30,
        "NodeRepairBlocked on each of the three",
    )
    for event in found:
        assert "Ready=Unknown for more than 30m" in event.message, event.message
        assert f"3 of 5 nodes of {prov} are unhealthy, more than 20%" in event.message, event.message
    print(f"3 of 5 NotReady: {len(found)} NodeRepairBlocked, e.g. {found[0].message!r}")
    time.sleep(6)  # three more resyncs
    for node in nodes:
        alive = node_or_none(core_v1, node)
        assert alive is not None and alive.metadata.deletion_timestamp is None, f"{node} was repaired"
    assert not any(m.startswith("Triggering termination for unhealthy node") for m in messages(lifecycle_log))

    for node in healed:
        revive(core_v1, node)
    for node in healed:
        wait_for(lambda node=node: ready_status(core_v1, node) == "True", 60, f"{node} Ready again")
    wait_for(lambda: node_or_none(core_v1, left) is None, 60, "the one still NotReady repaired")
    assert [m for m in messages(lifecycle_log) if m.startswith("Triggering termination")] == [
        f"Triggering termination for unhealthy node {left} (Ready=Unknown for more than 30m)"
    ]
    assert any("Ready=Unknown" in e.message for e in events_of(core_v1, "Unhealthy", [left]))
    wait_for(
        lambda: (
            (ps := live_pods(core_v1, namespace, "five"))
            and len({p.spec.node_name for p in ps if p.spec.node_name} - {left}) == 5
        ),
        90,
        "its pod on a new node",
    )
    for node in healed:
        alive = node_or_none(core_v1, node)
        assert alive is not None and alive.metadata.deletion_timestamp is None, f"{node} was repaired"
