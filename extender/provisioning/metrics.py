"""Prometheus metrics of the provisioning worker and the extender (namespace `karpy`).

Names follow Karpenter 0.5's `karpenter_allocation_controller_*_duration_seconds{provisioner}`.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

# Karpenter's DurationBuckets (pkg/metrics/constants.go) trimmed to what a batch can take.
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60)

BATCH_WAIT = Histogram(
    "karpy_allocation_controller_batch_window_seconds",
    "How long batching windows stayed open.",
    buckets=BUCKETS,
)
SCHEDULING = Histogram(
    "karpy_allocation_controller_scheduling_duration_seconds",
    "Duration of one provisioning pass (re-read, plan, launch, bind).",
    ["provisioner"],
    buckets=BUCKETS,
)
PACKING = Histogram(
    "karpy_allocation_controller_binpacking_duration_seconds",
    "Duration of the solver for one batch.",
    buckets=BUCKETS,
)
LAUNCH = Histogram(
    "karpy_allocation_controller_launch_duration_seconds",
    "Duration of one cloud create call (one CreateFleet).",
    ["provisioner"],
    buckets=BUCKETS,
)
NODE_CREATE = Histogram(
    "karpy_allocation_controller_node_create_duration_seconds",
    "Duration of creating the Node object of one launched instance.",
    ["provisioner"],
    buckets=BUCKETS,
)
BIND = Histogram(
    "karpy_allocation_controller_bind_duration_seconds",
    "Duration of binding one node's pods.",
    ["provisioner"],
    buckets=BUCKETS,
)
NODES_LAUNCHED = Counter("karpy_nodes_launched_total", "Nodes launched.", ["provisioner", "capacity_type"])
PODS_BOUND = Counter("karpy_pods_bound_total", "Pods bound to nodes karpy launched.", ["provisioner"])
LAUNCH_ERRORS = Counter(
    "karpy_launch_errors_total", "Failed launches, by error code.", ["provisioner", "code"]
)
EXTENDER = Histogram(
    "karpy_extender_request_duration_seconds",
    "Scheduler extender request durations.",
    ["verb"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1),
)
EXTENDER_GUARDED = Counter(
    "karpy_extender_guarded_nodes_total", "Nodes the extender's guard failed, by reason.", ["reason"]
)
EXTENDER_ERRORS = Counter(
    "karpy_extender_errors_total",
    "Extender requests answered with an error, by verb and reason (bad_request, exception).",
    ["verb", "reason"],
)
FAST_PATH = Counter("karpy_extender_fast_path_total", "Pods enqueued because the guard left them no node.")

# Pod startup, after Karpenter's karpenter_pods_startup_duration_seconds (pkg/metrics): creation ->
# bound and creation -> Ready, for pods on karpy's nodes; pods wait minutes, so the buckets reach 30 min.
STARTUP_BUCKETS = (1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 600, 1200, 1800)
PODS_STARTUP = Histogram(
    "karpy_pods_startup_duration_seconds",
    "Seconds from a pod's creation to its being bound (until=bound) or Ready (until=ready), "
    "for pods on karpy's nodes.",
    ["provisioner", "until"],
    buckets=STARTUP_BUCKETS,
)
PODS_PENDING = Gauge(
    "karpy_pods_pending",
    "Pending pods karpy sees, by reason (waiting_for_capacity, left_to_scheduler, unmodelled, over_limit, "
    "or the first rule every pool refuses the pod by: selector, taint, requirement, volume_zone, "
    "unknown_resource, no_type, too_big, min_values, spread, affinity, anti_affinity, other; "
    "see docs/explain.md).",
    ["reason"],
)
PODS_PENDING_OLDEST = Gauge(
    "karpy_pods_pending_oldest_seconds",
    "Age of the oldest pending pod, by reason (0 when none).",
    ["reason"],
)
BATCH_PODS = Histogram(
    "karpy_batch_pods",
    "Pods per provisioning batch.",
    buckets=(1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000),
)
