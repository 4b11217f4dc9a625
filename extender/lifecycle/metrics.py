"""Lifecycle metrics, named after Karpenter's (namespace `karpenter`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from prometheus_client import Counter, Gauge, Histogram

NAMESPACE = "karpenter"

NODES_TERMINATED = Counter(
    "nodes_terminated", "Nodes whose termination karpy triggered, by reason.", ["reason"], namespace=NAMESPACE
)
NODES_DRIFTED = Counter(
    "nodes_drifted",
    "Nodes found drifted from their Provisioner, by drift reason.",
    ["reason"],
    namespace=NAMESPACE,
)
TERMINATION_DURATION = Histogram(
    "nodes_termination_time_seconds",
    "Seconds from a node's deletionTimestamp to its finalizer being removed.",
    namespace=NAMESPACE,
    buckets=(1, 5, 10, 30, 60, 120, 300, 600, 1800),
)
EVICTIONS = Counter(
    "nodes_eviction_requests",
    "Eviction requests sent while draining, by outcome.",
    ["outcome"],
    namespace=NAMESPACE,
)
INTERRUPTION_RECEIVED = Counter(
    "interruption_received_messages",
    "Interruption queue messages received, by kind.",
    ["message_type"],
    namespace=NAMESPACE,
)
INTERRUPTION_DELETED = Counter(
    "interruption_deleted_messages",
    "Interruption queue messages deleted after handling.",
    namespace=NAMESPACE,
)
INTERRUPTION_LATENCY = Histogram(
    "interruption_message_queue_duration_seconds",
    "Seconds between an interruption event's time and its handling.",
    namespace=NAMESPACE,
)
INTERRUPTION_ACTIONS = Counter(
    "interruption_actions_performed",
    "Actions taken on interruption messages.",
    ["action"],
    namespace=NAMESPACE,
)
GC_INSTANCES = Counter(
    "garbage_collected_instances",
    "Instances terminated because no Node appeared for them.",
    namespace=NAMESPACE,
)
GC_NODES = Counter(
    "garbage_collected_nodes",
    "Nodes deleted because their instance was gone.",
    namespace=NAMESPACE,
)
IS_LEADER = Gauge(
    "leader_election_is_leader", "1 while this replica holds the leader Lease.", namespace=NAMESPACE
)
CONSOLIDATION_ACTIONS = Counter(
    "consolidation_actions_performed",
    "Consolidation actions by method (empty, multi-node, single-node) and outcome.",
    ["method", "outcome"],
    namespace=NAMESPACE,
)
CLUSTER_COST = Gauge(
    "consolidation_cluster_cost_dollars_per_hour",
    "$/h of a Provisioner's nodes as consolidation last saw them.",
    ["provisioner"],
    namespace=NAMESPACE,
)
LOWER_BOUND_COST = Gauge(
    "consolidation_lower_bound_dollars_per_hour",
    "Lower bound on the $/h of any set of new nodes that could hold a Provisioner's pods.",
    ["provisioner"],
    namespace=NAMESPACE,
)

# karpy's own lifecycle metrics (namespace `karpy`), beside the Karpenter-named ones above.
DISRUPTION_REASONS = ("empty", "expired", "interrupted", "consolidated", "drifted", "unhealthy")
DISRUPTION_OUTCOMES = ("performed", "blocked", "failed")
DISRUPTION_DECISIONS = Counter(
    "karpy_disruption_decisions",
    "Disruption decisions on karpy's nodes by reason (empty, expired, interrupted, consolidated, "
    "drifted, unhealthy) and outcome (performed; blocked, once per check a budget, the disruption "
    "slots, a do-not-disrupt annotation or, for repair, its pool's health hold it back; failed).",
    ["reason", "outcome"],
)
NODES = Gauge(
    "karpy_nodes",
    "karpy's nodes by Provisioner, capacity type, instance type and zone.",
    ["provisioner", "capacity_type", "instance_type", "zone"],
)
NODES_PRICE = Gauge(
    "karpy_nodes_price_dollars_per_hour",
    "$/h of karpy's nodes by Provisioner, capacity type, instance type and zone.",
    ["provisioner", "capacity_type", "instance_type", "zone"],
)
PROVISIONER_USAGE = Gauge(
    "karpy_provisioner_usage",
    "Resources a Provisioner's nodes use against its limits (cpu in cores, memory in bytes, counts), "
    "in-flight launches included.",
    ["provisioner", "resource_type"],
)
PROVISIONER_LIMIT = Gauge(
    "karpy_provisioner_limit",
    "A Provisioner's limits (cpu in cores, memory in bytes, counts).",
    ["provisioner", "resource_type"],
)
INTERRUPTION_QUEUE_MESSAGES = Gauge(
    "karpy_interruption_queue_messages",
    "Messages waiting in the interruption queue (SQS ApproximateNumberOfMessages), read each poll.",
)


def disruption(reason: str, outcome: str) -> None:
    """Count one disruption decision; an unknown reason or outcome is a programming error."""
    if reason not in DISRUPTION_REASONS or outcome not in DISRUPTION_OUTCOMES:
        raise ValueError(f"disruption decision {reason!r}/{outcome!r} is not one of the documented labels")
    DISRUPTION_DECISIONS.labels(reason=reason, outcome=outcome).inc()


@contextmanager
def disrupting(reason: str) -> Iterator[None]:
    """Around the step that carries out a disruption: `performed` when it returns, `failed` when it
    raises (the error goes on)."""
    try:
        yield
    except BaseException:
        disruption(reason, "failed")
        raise
    disruption(reason, "performed")
