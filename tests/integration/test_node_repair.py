"""Node repair on the local control plane + moto (issue 35): a node that was Ready and then reports an
EKS node-monitoring-agent condition False past its toleration is replaced at once, its PDB bypassed
(Karpenter's node health controller force-terminates); a pool with more than 20 % of its nodes
unhealthy is not repaired, and says so with a NodeRepairBlocked Event.

The condition is written on the Node's status as the agent would; its lastTransitionTime is set 31
minutes back, so the 30-minute toleration (Karpenter AWS `RepairPolicies`) has run out without a
30-minute test.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes import client

from extender.api import labels as wk
from tests.integration import lifecycle_harness
from tests.integration.helpers import unique, wait_for
from tests.integration.lifecycle_harness import (
    Karpy,
    available,
    bound_node,
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
    prov = unique("repair")
    provisioner(repairing.kube, prov, ON_DEMAND)
    deployment(apps_v1, namespace, "web", prov, 2, cpu="500m")
    node = bound_node(core_v1, namespace, "web")
    wait_for(
        lambda: ready_untainted(core_v1, node) and available(core_v1, namespace, "web") == 2, 60, "web up"
    )
    pdb(repairing.kube, namespace, "web")  # no voluntary eviction is allowed
    instance = instance_of(core_v1.read_node(node))

    report_condition(core_v1, node, "KernelReady", "False", minutes_ago=31)
    assert carries(core_v1, node, "KernelReady"), "the condition was not kept on the Node"
    wait_for(lambda: node_or_none(core_v1, node) is None, 60, "unhealthy node deleted")
    wait_for(lambda: instance_state(repairing, instance) == "terminated", 30, "its instance terminated")

    def moved() -> bool:
        pods = live_pods(core_v1, namespace, "web")
        return len(pods) == 2 and all(p.spec.node_name not in (None, node) for p in pods)

    wait_for(moved, 90, "web's pods on a new node")
    log = messages(lifecycle_log)
    assert f"Triggering termination for unhealthy node {node} (KernelReady=False for more than 30m)" in log
    assert any(m.startswith("Deleted pod ") and f"of node {node}" in m for m in log), "PDB not bypassed"


def test_a_pool_with_too_many_unhealthy_nodes_is_not_repaired(
    repairing: Karpy, core_v1: Any, apps_v1: Any, namespace: str, lifecycle_log: pytest.LogCaptureFixture
) -> None:
    prov = unique("sick")
    provisioner(repairing.kube, prov, ON_DEMAND)
    spread = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": wk.HOSTNAME, "labelSelector": {"matchLabels": {"app": "apart"}}}
            ]
        }
    }
    deployment(apps_v1, namespace, "apart", prov, 2, cpu="500m", affinity=spread)
    nodes = wait_for(
        lambda: (
            (ps := live_pods(core_v1, namespace, "apart"))
            and len({p.spec.node_name for p in ps if p.spec.node_name}) == 2
            and sorted({p.spec.node_name for p in ps})
        ),
        90,
        "apart on two nodes",
    )
    for node in nodes:
        wait_for(lambda node=node: ready_untainted(core_v1, node), 60, f"{node} Ready")
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
