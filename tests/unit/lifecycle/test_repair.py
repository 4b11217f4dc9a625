"""Node repair's rules, ported from Karpenter's node health controller (kubernetes-sigs/karpenter
pkg/controllers/node/health/controller.go and suite_test.go) with the AWS provider's repair policies
(aws/karpenter-provider-aws pkg/cloudprovider/cloudprovider.go `RepairPolicies`)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from extender.api import labels
from extender.api.node import Node
from extender.lifecycle import repair, termination
from tests.builders import T0, node_manifest, stamp


def sick(
    name: str = "n1", *, kind: str = "Ready", status: str = "False", since_minutes: float = 31, **kw: Any
) -> Node:
    manifest = node_manifest(name, **kw)
    since = stamp(T0 - timedelta(minutes=since_minutes))
    conditions = [c for c in manifest["status"]["conditions"] if c["type"] != kind]
    conditions.append({"type": kind, "status": status, "reason": "Injected", "lastTransitionTime": since})
    if kind != "Ready":  # the kubelet still reports Ready: an agent condition alone is unhealthy
        conditions = [{"type": "Ready", "status": "True", "reason": "KubeletReady"}, *conditions]
    manifest["status"]["conditions"] = conditions
    return Node.from_live(manifest)


def healthy(name: str) -> Node:
    return Node.from_live(node_manifest(name))


def test_a_healthy_node_carries_no_unhealthy_condition_and_is_never_due() -> None:
    assert healthy("n1").unhealthy == () and repair.due(healthy("n1"), T0) is None


def test_ready_false_or_unknown_is_tolerated_30_minutes() -> None:
    # Karpenter AWS: NodeReady False / Unknown, TolerationDuration 30m.
    for status in ("False", "Unknown"):
        young = repair.due(sick(status=status, since_minutes=29), T0)
        assert young is not None and young.at == T0 + timedelta(minutes=1)
        old = repair.due(sick(status=status, since_minutes=31), T0)
        assert old is not None and old.at < T0


def test_accelerated_hardware_is_tolerated_10_minutes_and_the_earliest_due_decides() -> None:
    # Karpenter: findUnhealthyConditions keeps the condition with the earliest termination time.
    found = repair.due(sick(kind="AcceleratedHardwareReady", since_minutes=11), T0)
    assert found is not None and found.toleration_seconds == 600 and found.at < T0
    assert repair.due(sick(kind="KernelReady", since_minutes=11), T0).at > T0  # type: ignore[union-attr]


def test_a_condition_no_policy_names_is_not_unhealthy() -> None:
    # MemoryPressure is the kubelet's eviction signal, not in the AWS provider's repair policies.
    assert repair.due(sick(kind="MemoryPressure", status="True"), T0) is None


def test_a_node_that_never_joined_is_left_to_the_registration_ttl() -> None:
    never = Node.from_live(node_manifest("n1", ready=False, reason="NodeStatusNeverUpdated"))
    assert never.unhealthy and repair.due(never, T0) is None


def test_up_to_20_percent_of_a_pool_may_be_repaired_rounding_up() -> None:
    # Karpenter isNodePoolHealthy: GetScaledValueFromIntOrPercent("20%", n, roundUp=true); one of
    # three may be unhealthy "even though that's 33%".
    three = [sick("a"), healthy("b"), healthy("c")]
    assert repair.pool_healthy(three) == (True, 1)
    assert repair.pool_healthy([sick("a"), sick("b"), healthy("c")]) == (False, 2)
    ten = [sick(f"s{i}") for i in range(2)] + [healthy(f"h{i}") for i in range(8)]
    assert repair.pool_healthy(ten) == (True, 2)
    assert repair.pool_healthy([*ten, sick("s2")]) == (True, 3)  # ceil(0.2 * 11) = 3
    assert repair.pool_healthy([*ten, sick("s2"), sick("s3")]) == (False, 4)  # ceil(0.2 * 12) = 3


def test_a_repaired_nodes_drain_deadline_is_its_stamp_before_any_grace_period() -> None:
    # Karpenter annotates the NodeClaim's termination timestamp with now before deleting it, so the
    # drain force-deletes at once (terminator: NodeClaimTerminationTimestampAnnotationKey).
    stamped = {labels.TERMINATION_TIMESTAMP_ANNOTATION: stamp(T0)}
    deleting = Node.from_live(node_manifest("n1", deleting=True, created=T0, annotations=stamped))
    assert termination.deadline_of(deleting, None) == T0
    assert termination.deadline_of(deleting, 3600) == T0
    plain = Node.from_live(node_manifest("n1", deleting=True, created=T0))
    assert termination.deadline_of(plain, None) is None
    assert termination.deadline_of(plain, 60) == T0 + timedelta(seconds=60)
