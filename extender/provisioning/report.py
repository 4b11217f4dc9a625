"""Report: what a batch did, as Events (pods, Provisioners), Provisioner status, logs and the
batch's own figures (BatchReport, read by the benchmarks and integration tests).

An Event is best effort and never holds up a launch or a bind: per-pod Events go through the event
pool. A pod karpy will not provision for gets one Event per reason per REPORT_TTL_SECONDS however
many batches it comes back in (`ignoring`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from cachetools import TTLCache
from kubernetes import client

from extender.api.pod import Pod
from extender.api.provisioner import Provisioner
from extender.api.quantity import format_cpu, format_memory
from extender.api.resources import Resources
from extender.cluster import events, inventory, v1status
from extender.cluster import nodes as kube_nodes
from extender.cluster import pool_resources as kube_provisioners
from extender.cluster.errors import ClusterError
from extender.cluster.quarantine import short
from extender.provisioning import backoff, pending
from extender.provisioning.backoff import Hold
from extender.provisioning.pools import Pools
from extender.scheduling.explain import MESSAGE_LIMIT, World, explain, summary
from extender.scheduling.plan import Plan, Unschedulable

log = logging.getLogger("karpy.controller.provisioning")

#: A pod karpy will not provision for (unparseable, or a rule it does not model) gets one Event per
#: reason this often, however many batches it comes back in.
REPORT_TTL_SECONDS = 600.0

#: Pods per batch whose FailedProvisioning is explained pool by pool (a solve per pool each); the
#: rest carry the solver's reason.
MAX_EXPLAINED = 10

#: Event reasons on pods (README, "Events").
FAILED_PROVISIONING_REASON = "FailedProvisioning"
UNMODELLED_REASON = "UnmodelledRule"
INVALID_POD_REASON = "InvalidPod"
NOT_BINDING_REASON = "NotBinding"
#: A launch failed in a way retrying will not fix: on the pool and its pods (Karpenter's NodeClaim
#: `Launched=False` reason).
LAUNCH_FAILED_REASON = backoff.LAUNCH_FAILED


@dataclass
class BatchReport:
    """What one batch did and where its time went (the benchmarks read these)."""

    pods: int = 0
    bound: int = 0
    #: Pods whose room was held on a node for kube-scheduler to bind (extender/provisioning/nominate.py).
    nominated: int = 0
    nodes: int = 0
    fleet_calls: int = 0
    #: Distinct instance-type option lists over the batch's plans (a fleet call is allowed per list).
    option_lists: int = 0
    #: Keys of the batch's pods that reached the window through the extender before the pod watch.
    fast_path: frozenset[str] = frozenset()
    timings: dict[str, float] = field(default_factory=dict)
    #: The lower bound on the $/h of the batch's new nodes (scheduling/bound.py) and their planned
    #: $/h; set on the event pool after the batch's binds (`Reporter.bound`), None until then.
    lower_bound: float | None = None
    planned_price: float = 0.0
    # Launch groups run on a thread pool and update one report; `+=` on a field is not atomic.
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, phase: str, seconds: float) -> None:
        with self._lock:
            self.timings[phase] = self.timings.get(phase, 0.0) + seconds

    def count(self, name: str, n: int = 1) -> None:
        """Add n to a counter field (bound, nominated, nodes, fleet_calls, option_lists)."""
        with self._lock:
            setattr(self, name, getattr(self, name) + n)


def words(message: str, limit: int = MESSAGE_LIMIT) -> str:
    """`message` within `limit` characters, cut at a word, never inside one."""
    if len(message) <= limit:
        return message
    cut = message[: limit - 4].rsplit(" ", 1)[0].rstrip(";, ")
    return cut + " ..."


class Reporter:
    """Thread-safe: launch and bind threads report. `_reported` is guarded by `_lock`."""

    def __init__(self, kube: client.ApiClient, pools: Pools, clock: Callable[[], float]) -> None:
        self.kube = kube
        self.pools = pools
        self.clock = clock
        self._reported: TTLCache[tuple[str, str], bool] = TTLCache(
            maxsize=10_000, ttl=REPORT_TTL_SECONDS, timer=clock
        )
        self._lock = threading.Lock()
        #: Why each pod a batch could not place still waits (karpy_pods_pending{reason}).
        self.reasons = pending.PendingReasons(clock)

    def ignoring(self, pod: Pod, reason: str, message: str) -> None:
        """Log and record (Warning Event) why karpy will not provision for `pod`, once per
        REPORT_TTL_SECONDS for the same pod and message."""
        self.reasons.set(pod.key, pending.UNMODELLED)
        if not self._first(pod, message):
            log.debug("Ignoring pod %s, %s", pod.key, message)
            return
        log.info("Ignoring pod %s, %s", pod.key, message)
        self.pod_event(pod, reason, message)

    def waiting(self, pod: Pod, reason: str, message: str) -> None:
        """A Warning Event on `pod` saying why no node is launched for it now, once per
        REPORT_TTL_SECONDS for the same pod and message."""
        if self._first(pod, message):
            self.pod_event(pod, reason, message)

    def _first(self, pod: Pod, message: str) -> bool:
        key = (pod.uid or pod.key, message)
        with self._lock:
            seen = key in self._reported
            self._reported[key] = True
        return not seen

    def pod_event(self, pod: Pod, reason: str, message: str, *, warning: bool = True) -> None:
        self.pools.events.submit(
            events.record,
            self.kube,
            kind="Pod",
            name=pod.name,
            namespace=pod.namespace,
            uid=pod.uid,
            reason=reason,
            message=message,
            warning=warning,
        )

    def scheduled(self, provisioner: str) -> Callable[[Pod, str], None]:
        """The `Scheduled` Event of a pod karpy bound (kube-scheduler's, naming the Provisioner)."""

        def record(pod: Pod, node: str) -> None:
            self.pod_event(
                pod,
                "Scheduled",
                f"Successfully assigned {pod.key} to {node} (provisioner {provisioner})",
                warning=False,
            )

        return record

    def provisioner_event(
        self, provisioner: Provisioner, reason: str, message: str, *, warning: bool = False
    ) -> None:
        events.record(
            self.kube,
            kind=provisioner.kind,
            api_version=kube_provisioners.API_VERSIONS[provisioner.kind],
            name=provisioner.name,
            uid=provisioner.uid,
            reason=reason,
            message=message,
            warning=warning,
        )

    def pool_backoff(self, pool: Provisioner, hold: Hold | None) -> None:
        """Tell of a pool's launch backoff (backoff.py): one Warning Event per failure and the
        NodePool's NodeRegistrationHealthy condition; lifted: the condition back to True."""
        if hold is None:
            log.info("Launching for %s %s again", pool.noun, pool.name)
            if pool.has_v1_status:
                v1status.set_condition(self.kube, pool.name, True, "", "")
            return
        seconds = hold.seconds_left(self.clock())
        message = f"{hold.message}; not launching for it for {seconds:.0f}s (failure {hold.failures})"
        log.error("Backing off %s %s, %s", pool.noun, pool.name, short(message, 1000))
        self.provisioner_event(pool, hold.reason, short(message), warning=True)
        if pool.has_v1_status:
            v1status.set_condition(self.kube, pool.name, False, hold.reason, hold.message)

    def bound(self, plan: Plan, report: BatchReport) -> None:
        """Compute the plan's lower bound on the event pool, after the caller has bound the batch:
        it only says how far the new nodes' price may be from the cheapest possible (for a small
        batch it costs ten times the solve), so it never holds up a bind. Logged, and kept on the
        report."""
        if not plan.nodes or plan.bounding is None:
            return
        bounding, price, count = plan.bounding, plan.total_price, len(plan.nodes)

        def compute() -> None:
            try:
                bound = bounding()
            except Exception:  # the event pool's boundary: a report line, nothing depends on it
                log.exception("Computing the lower bound of a batch's plan failed")
                return
            report.lower_bound, report.planned_price = bound, price
            gap = f" (+{(price / bound - 1) * 100:.1f}%)" if bound > 0 else ""
            log.info(
                "Lower bound of the batch's %d new node(s) $%.4f/h, planned $%.4f/h%s",
                count,
                bound,
                price,
                gap,
            )

        self.pools.events.submit(compute)

    def plan(
        self, plan: Plan, provisioners: Mapping[str, Provisioner], world: World | None = None
    ) -> list[str]:
        """Log the plan and report the pods it could not place; the keys of those that should wait
        (parked), which excludes pods with a rule karpy does not model (waiting changes nothing).
        With the `world` the plan was made in, the first MAX_EXPLAINED pods' FailedProvisioning
        says each pool's first rule (scheduling/explain.py), on the event pool."""
        explained = 0
        for line in plan.describe():
            if not line.startswith("Unable to schedule"):
                log.info("%s", line)
        limited: dict[str, str] = {}
        park: list[str] = []
        for item in plan.unschedulable:
            if item.unmodelled:
                self.ignoring(item.pod, UNMODELLED_REASON, item.reason)
                continue
            log.info("Unable to schedule pod %s, %s", item.pod.key, item.reason)
            if item.over_limits:
                limited.setdefault(item.over_limits, item.reason)
                self.reasons.set(item.pod.key, pending.OVER_LIMIT)
            if world is not None and explained < MAX_EXPLAINED:
                explained += 1
                self.pools.events.submit(self._explain_failed, item, world)
            else:
                self._failed(item.pod, item.reason)
            park.append(item.pod.key)
        for name, reason in limited.items():
            if name in provisioners:
                self.provisioner_event(provisioners[name], "LimitExceeded", reason, warning=True)
        return park

    def _explain_failed(self, item: Unschedulable, world: World) -> None:
        """FailedProvisioning in explain's words, and the pod's reason code for the pending metric;
        the solver's reason when the pod fits alone (it lost to others in the batch)."""
        try:
            found = explain(item.pod, world)
        except Exception:  # the event pool's boundary: the solver's words still go out
            log.exception("Explaining pod %s failed", item.pod.key)
            self._failed(item.pod, item.reason)
            return
        if found.admitted:
            self._failed(item.pod, item.reason)
            return
        self.reasons.set(item.pod.key, pending.code(found.reason))
        self._failed(item.pod, summary(found))

    def _failed(self, pod: Pod, message: str) -> None:
        """The pod's one FailedProvisioning Event, its count raised on each repeat."""
        events.record_counted(
            self.kube,
            kind="Pod",
            name=pod.name,
            namespace=pod.namespace,
            uid=pod.uid,
            reason=FAILED_PROVISIONING_REASON,
            message=words(message),
        )

    def refresh_status(self, provisioner_names: Iterable[str]) -> None:
        """Publish status.resources from live + in-flight nodes."""
        usage = inventory.usage(kube_nodes.list_nodes(self.kube, karpy_only=True))
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        for name in provisioner_names:
            used = usage.get(name) or Resources()
            status = {
                "resources": {
                    "cpu": format_cpu(used.cpu),
                    "memory": format_memory(int(used.memory // 1024) * 1024),
                },
                "lastScaleTime": now,
            }
            try:
                kube_provisioners.patch_status(self.kube, name, status)
            except ClusterError as err:  # status is informational
                log.debug("Failed to update status of provisioner %s, %s", name, err)
