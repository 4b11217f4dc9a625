"""The provisioning worker: batch -> re-read -> plan -> launch -> Node -> bind.

One loop thread takes batches from the Batcher (fed by the pod watch, the extender's fast path and
retries); the lifecycle borrows the same pipeline through `provision_replacements`. Launches run
only while this replica leads.

On start and on every gain of leadership the loop first adopts instances an interrupted launch left
without a Node (`adopt_instances`), before any batch is planned: the pending pods then pack onto
those nodes as existing capacity instead of being launched for again.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from cachetools import TTLCache
from kubernetes import client

from extender.api import labels as wk
from extender.api.pod import Pod, PodError
from extender.api.provisioner import Provisioner
from extender.api.quantity import format_cpu, format_memory
from extender.api.resources import Resources
from extender.cloud.types import (
    CloudError,
    CloudProvider,
    Instance,
    InsufficientCapacityError,
    OfferingKey,
)
from extender.cluster import events, objects
from extender.cluster import namespaces as kube_namespaces
from extender.cluster import nodes as kube_nodes
from extender.cluster import pods as kube_pods
from extender.cluster import provisioners as kube_provisioners
from extender.cluster.objects import pod_key
from extender.provisioning import binder, inventory, launcher, metrics
from extender.provisioning.batcher import Batcher
from extender.provisioning.snapshot import BindSnapshot
from extender.provisioning.watcher import PodWatcher
from extender.scheduling.instancetypes import InstanceType
from extender.scheduling.plan import ExistingNode, Plan, PlannedNode
from extender.scheduling.solver import solve
from extender.settings import Settings
from extender.state import ClusterState

log = logging.getLogger("karpy.controller.provisioning")

#: Offerings EC2 refused for capacity are left out this long (modern Karpenter's UnavailableOfferingsTTL).
UNAVAILABLE_TTL_SECONDS = 180.0
#: Re-plans of one batch after capacity errors before the rest waits for the next batch.
MAX_REPLANS = 3
#: Pods no Provisioner could take are retried this often (a Provisioner may have changed).
PARKED_RETRY_SECONDS = 30.0
#: A follower looks at its leadership this often, so it adopts and provisions soon after gaining it.
FOLLOWER_POLL_SECONDS = 0.5
#: A pod karpy will not provision for (unparseable, or a rule it does not model) gets one Event per
#: reason this often, however many batches it comes back in.
REPORT_TTL_SECONDS = 600.0
#: A pod the re-check refused twice within this long waits for the parked retry, not the next batch;
#: its refusals also change the launch id of the next node planned for it (launcher.launch_id).
REFUSED_TTL_SECONDS = 300.0

#: Event reasons on pods (README, "Events").
UNMODELLED_REASON = "UnmodelledRule"
INVALID_POD_REASON = "InvalidPod"
NOT_BINDING_REASON = "NotBinding"


@dataclass
class BatchReport:
    """What one batch did and where its time went (the benchmarks read these)."""

    pods: int = 0
    bound: int = 0
    nodes: int = 0
    fleet_calls: int = 0
    #: Distinct instance-type option lists over the batch's plans (a fleet call is allowed per list).
    option_lists: int = 0
    #: Keys of the batch's pods that reached the window through the extender before the pod watch.
    fast_path: frozenset[str] = frozenset()
    timings: dict[str, float] = field(default_factory=dict)
    # Launch groups run on a thread pool and update one report; `+=` on a field is not atomic.
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, phase: str, seconds: float) -> None:
        with self._lock:
            self.timings[phase] = self.timings.get(phase, 0.0) + seconds

    def count(self, name: str, n: int = 1) -> None:
        """Add n to a counter field (bound, nodes, fleet_calls, option_lists)."""
        with self._lock:
            setattr(self, name, getattr(self, name) + n)


@dataclass
class _Context:
    provisioners: dict[str, Provisioner]
    catalog: list[InstanceType]
    daemonsets: list[Pod]


class ProvisioningController:
    def __init__(
        self,
        *,
        settings: Settings,
        kube: client.ApiClient,
        cloud: CloudProvider,
        state: ClusterState,
        is_leader: Callable[[], bool] = lambda: True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.kube = kube
        self.cloud = cloud
        self.state = state
        self.is_leader = is_leader
        self.clock = clock
        self.batcher = Batcher(settings.batching, clock)
        self.watcher = PodWatcher(kube, on_pods=self._watched, on_synced=state.set_ready)
        self.unavailable: TTLCache[OfferingKey, bool] = TTLCache(
            maxsize=10_000, ttl=UNAVAILABLE_TTL_SECONDS, timer=clock
        )
        self.reports: list[BatchReport] = []
        self._parked: dict[str, dict[str, Any]] = {}
        self._pod_cache = inventory.PodCache()
        self._reported: TTLCache[tuple[str, str], bool] = TTLCache(
            maxsize=10_000, ttl=REPORT_TTL_SECONDS, timer=clock
        )
        #: pod key -> times the re-check before binding refused it.
        self._refused: TTLCache[str, int] = TTLCache(maxsize=10_000, ttl=REFUSED_TTL_SECONDS, timer=clock)
        self._refused_lock = threading.Lock()
        self._fast_path: set[str] = set()
        self._parked_at = clock()
        self._lock = threading.Lock()
        self._fast_lock = threading.Lock()
        self._launch_pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="launch")
        self._bind_pool = ThreadPoolExecutor(max_workers=32, thread_name_prefix="bind")
        self._event_pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="events")

    # -- entry points ----------------------------------------------------------------------------

    def _watched(self, pods: Mapping[str, Mapping[str, Any]]) -> None:
        """Pods from the watch, less those a batch is placing now: kube-scheduler's refusal of a
        claimed pod updates it, and it would only open a second window. A batch binds, parks or
        re-adds every pod it claimed."""
        self.batcher.add({key: pod for key, pod in pods.items() if not self.state.claimed(key)})

    def enqueue(self, pods: Sequence[Mapping[str, Any]]) -> None:
        """Fast path: pods (API JSON) the extender's guard left without a node."""
        new = self.batcher.add({pod_key(p): dict(p) for p in pods})
        with self._fast_lock:
            self._fast_path.update(new)

    def mark_unavailable(self, key: OfferingKey) -> None:
        self.unavailable[key] = True

    def start(self, stop: threading.Event) -> list[threading.Thread]:
        # Discovering the catalog takes seconds (DescribeInstanceTypes pages, offerings, prices):
        # fetch it now rather than inside the first batch's latency.
        warm = threading.Thread(target=self._warm_catalog, name="catalog-warmup", daemon=True)
        warm.start()
        loop = threading.Thread(target=self.run, args=(stop,), name="provisioning", daemon=True)
        loop.start()
        return [self.watcher.start(stop), loop, warm]

    def _warm_catalog(self) -> None:
        try:
            self.cloud.get_instance_types(None)
        except Exception as err:  # the first batch fetches it again and reports the failure there
            log.warning("Discovering instance types failed, %s", err)

    def run(self, stop: threading.Event) -> None:
        log.info("Waiting for unschedulable pods")
        leading = False
        while not stop.is_set():
            if self.is_leader() != leading:
                leading = not leading
                if leading:
                    self._on_started_leading()
            self._unpark()
            batch, waited = self.batcher.wait(
                stop, idle_return=PARKED_RETRY_SECONDS if leading else FOLLOWER_POLL_SECONDS
            )
            if not batch:
                continue
            if not self.is_leader():
                self._parked.update(batch)
                continue
            log.info("Batched %d pods in %.3fs", len(batch), waited)
            metrics.BATCH_WAIT.observe(waited)
            try:
                report = self.provision(batch)
            except Exception as err:  # one failed batch must not stop provisioning
                log.error("Provisioning failed, %s", err)
                self._parked.update(batch)
                continue
            report.timings["batch_wait"] = waited

    def _on_started_leading(self) -> None:
        try:
            self.adopt_instances(self.cloud.list())
        except Exception as err:  # GC still bounds how long an unadopted instance lives
            log.error("Adopting instances of interrupted launches failed, %s", err)
        # Pods parked while following were waiting for exactly this; the 30 s retry is for Provisioners.
        self._unpark(now=True)

    def adopt_instances(self, instances: Sequence[Instance]) -> list[str]:
        """Create the Nodes of karpy instances that have none; the adopted node names.

        A controller killed between CreateFleet and the Node create leaves such an instance while
        its pods are still pending. Under the batch lock, so no batch plans those pods meanwhile;
        the next batch binds them to the adopted node as existing capacity. An instance whose
        Provisioner or instance type is gone is left to garbage collection.
        """
        with self._lock:
            found = launcher.without_nodes(kube_nodes.list_karpy_nodes(self.kube), instances)
            if not found:
                return []
            log.info(
                "Found %d instance(s) without a node from interrupted launches: %s",
                len(found),
                [i.id for i in found],
            )
            ctx = self._context()
            types = {t.name: t for t in ctx.catalog}
            adopted: list[str] = []
            for instance in found:
                prov = ctx.provisioners.get(instance.tags.get(wk.PROVISIONER_NAME, ""))
                itype = types.get(instance.instance_type)
                if prov is None or itype is None:
                    log.info(
                        "Leaving instance %s to garbage collection, its provisioner or type is gone",
                        instance.id,
                    )
                    continue
                manifest = launcher.adopted_node(instance, itype, prov, region=self.settings.aws.region)
                kube_nodes.create_node(self.kube, manifest)
                adopted.append(manifest["metadata"]["name"])
                log.info(
                    "Adopted instance %s of an interrupted launch as node %s",
                    instance.id,
                    manifest["metadata"]["name"],
                )
            return adopted

    def provision_replacements(self, pods: Sequence[Mapping[str, Any]]) -> list[str]:
        """Launch nodes (without binding) for pods of a node about to be drained; their names."""
        parsed = [p for p in (self._parse(m) for m in pods) if p is not None]
        if not parsed:
            return []
        with self._lock:
            ctx = self._context()
            names: list[str] = []
            self._plan_and_launch(parsed, ctx, BatchReport(), bind=False, launched=names)
            return names

    # -- one batch -------------------------------------------------------------------------------

    def provision(self, batch: Mapping[str, Mapping[str, Any]]) -> BatchReport:
        with self._fast_lock:
            fast = frozenset(self._fast_path.intersection(batch))
            self._fast_path.difference_update(batch)
        report = BatchReport(fast_path=fast)
        started = self.clock()
        with self._lock:
            # Claimed before the re-read: from here the extender keeps kube-scheduler off these pods,
            # so none of them is placed twice and no node launched for them comes up empty.
            self.state.claim(batch)
            try:
                ctx = self._provision_claimed(batch, report)
            finally:
                self.state.unclaim(batch)
        if ctx is None:
            return report
        elapsed = self.clock() - started
        for name in ctx.provisioners:
            metrics.SCHEDULING.labels(provisioner=name).observe(elapsed)
        self.reports = [*self.reports[-99:], report]
        return report

    def _provision_claimed(
        self, batch: Mapping[str, Mapping[str, Any]], report: BatchReport
    ) -> _Context | None:
        """Re-read, plan, launch and bind one batch; its context, or None when nothing was planned."""
        t0 = self.clock()
        pending, _ = kube_pods.list_pending(self.kube)
        # Re-read: a pod bound or deleted while the window was open must not be bound twice.
        fresh = {pod_key(p): p for p in pending if pod_key(p) in batch}
        # A pod karpy cannot read is reported and left out; the rest of the batch goes on.
        pods = [p for p in (self._parse_pending(m) for m in fresh.values()) if p is not None]
        report.add("reread", self.clock() - t0)
        report.pods = len(pods)
        if not pods:
            return None
        log.info("Found %d provisionable pod(s)", len(pods))
        ctx = self._context()
        if not ctx.provisioners:
            log.info("No provisioners found, %d pod(s) wait for one", len(pods))
            self._parked.update({p.key: fresh[p.key] for p in pods})
            return None
        self._plan_and_launch(pods, ctx, report, bind=True, manifests=fresh)
        self._update_status(ctx)
        return ctx

    def _context(self) -> _Context:
        provisioners = kube_provisioners.list_configured(self.kube, self.settings)
        daemonsets = [
            p for p in (self._parse(m) for m in kube_pods.daemonset_pods(self.kube)) if p is not None
        ]
        catalog = self.cloud.get_instance_types(None) if provisioners else []
        return _Context({p.name: p for p in provisioners}, catalog, daemonsets)

    def _inventory(self) -> inventory.Inventory:
        """Every node and every bound pod (one list each), and the namespaces' labels."""
        nodes = kube_nodes.list_nodes(self.kube)
        assigned = kube_pods.list_assigned(self.kube)
        result = inventory.build(
            nodes, assigned, self.state.marked(), self._namespaces(), cache=self._pod_cache
        )
        self.state.set_nodes(result.nodes)
        return result

    def _namespaces(self) -> dict[str, dict[str, str]] | None:
        """Namespace -> labels; None (unknown: pods with a namespaceSelector are not provisioned
        for) when they cannot be listed."""
        try:
            return kube_namespaces.list_labels(self.kube)
        except Exception as err:
            log.warning("Listing namespaces failed, namespace selectors are not evaluated, %s", err)
            return None

    def _plan_and_launch(
        self,
        pods: list[Pod],
        ctx: _Context,
        report: BatchReport,
        *,
        bind: bool,
        manifests: Mapping[str, Mapping[str, Any]] | None = None,
        launched: list[str] | None = None,
    ) -> None:
        remaining = pods
        for attempt in range(MAX_REPLANS + 1):
            t0 = self.clock()
            inv = self._inventory()
            if bind:
                # kube-scheduler may have bound some between the re-read and this listing.
                unbound = [p for p in remaining if p.key not in inv.assigned]
                if len(unbound) < len(remaining):
                    log.info("Not provisioning for %d pod(s) bound meanwhile", len(remaining) - len(unbound))
                    if not unbound:
                        return
                    remaining = unbound
                existing = inv.existing
            else:
                existing = _topology_only(inv.existing, {p.key for p in remaining})
            unavailable = frozenset(
                (k.instance_type, k.zone, k.capacity_type) for k in list(self.unavailable)
            )
            plan = solve(
                remaining,
                list(ctx.provisioners.values()),
                ctx.catalog,
                daemonsets=ctx.daemonsets,
                existing_nodes=existing,
                unavailable=unavailable,
                usage=inv.usage,
                # The bound is for `karpy plan` and the benchmarks; a batch is pending pods waiting.
                with_bound=False,
                namespaces=inv.namespaces,
            )
            packing = self.clock() - t0
            metrics.PACKING.observe(packing)
            report.add("packing", packing)
            self._log_plan(plan, ctx, manifests or {})
            snapshot = BindSnapshot(inv.existing, inv.namespaces, plan.existing) if bind else None
            if snapshot is not None:
                for node, placed in plan.existing.items():
                    report.count("bound", self._bind(node, placed, "", report, manifests, snapshot))
            with self._refused_lock:
                retries = dict(self._refused)
            groups = launcher.group(plan.nodes, ctx.provisioners, attempt, retries)
            report.count(
                "option_lists", len({(n.provisioner, tuple(t.name for t in n.options)) for n in plan.nodes})
            )
            results = list(
                self._launch_pool.map(
                    lambda g, snap=snapshot: self._launch_group(g, report, snap, manifests), groups
                )
            )
            retry: list[Pod] = []
            for names, unlaunched in results:
                if launched is not None:
                    launched.extend(names)
                retry.extend(unlaunched)
            if not retry:
                return
            if attempt < MAX_REPLANS:
                log.info("Re-planning %d pod(s) without the offerings EC2 refused", len(retry))
            remaining = retry
        if manifests:
            self._parked.update({p.key: dict(manifests[p.key]) for p in remaining if p.key in manifests})

    def _launch_group(
        self,
        group: launcher.LaunchGroup,
        report: BatchReport,
        snapshot: BindSnapshot | None,
        manifests: Mapping[str, Mapping[str, Any]] | None,
    ) -> tuple[list[str], list[Pod]]:
        """Launch one group and bind its pods (`snapshot` set; None launches without binding);
        (node names, pods of nodes EC2 refused for capacity, to re-plan)."""
        request = group.request
        provisioner = request.provisioner
        if not self.is_leader():
            # Leadership lapsed while planning: the new leader launches for these pods, not us.
            log.info("Not launching %d node(s), no longer the leader", request.count)
            self._park(group, manifests)
            return [], []
        t0 = self.clock()
        report.count("fleet_calls")
        try:
            result = self.cloud.create(request)
        except InsufficientCapacityError as err:
            self._note_unavailable(err.offerings)
            metrics.LAUNCH_ERRORS.labels(provisioner=provisioner.name, code=err.code).inc()
            log.error("Launching %d node(s) failed, %s", request.count, err)
            return [], [p for node in group.nodes for p in node.pods]
        except CloudError as err:
            metrics.LAUNCH_ERRORS.labels(provisioner=provisioner.name, code=err.code or "Unknown").inc()
            log.error("Provisioning failed, launching node, %s", err)
            self._provisioner_event(provisioner, "FailedLaunch", f"launching node, {err}", warning=True)
            self._park(group, manifests)
            return [], []
        finally:
            elapsed = self.clock() - t0
            metrics.LAUNCH.labels(provisioner=provisioner.name).observe(elapsed)
            report.add("fleet", elapsed)
        self._note_unavailable(result.unavailable)
        names: list[str] = []
        for instance, planned in zip(result.instances, group.nodes, strict=False):
            t1 = self.clock()
            manifest = launcher.node_for(instance, planned, provisioner, region=self.settings.aws.region)
            name = manifest["metadata"]["name"]
            kube_nodes.create_node(self.kube, manifest)
            created = self.clock() - t1
            metrics.NODE_CREATE.labels(provisioner=provisioner.name).observe(created)
            report.add("node_create", created)
            report.count("nodes")
            names.append(name)
            metrics.NODES_LAUNCHED.labels(
                provisioner=provisioner.name, capacity_type=instance.capacity_type
            ).inc()
            self._provisioner_event(
                provisioner,
                "LaunchedNode",
                f"Launched node {name} ({instance.instance_type}, {instance.zone}, {instance.capacity_type}) "
                f"for {len(planned.pods)} pod(s)",
            )
            if snapshot is not None:
                report.count(
                    "bound", self._bind(name, planned.pods, provisioner.name, report, manifests, snapshot)
                )
        # Nodes EC2 did not launch (partial fleet): their pods go round again.
        return names, [p for node in group.nodes[len(result.instances) :] for p in node.pods]

    def _bind(
        self,
        node: str,
        pods: Sequence[Pod],
        provisioner: str,
        report: BatchReport,
        manifests: Mapping[str, Mapping[str, Any]] | None,
        snapshot: BindSnapshot,
    ) -> int:
        t0 = self.clock()
        admitted, refused = self._recheck(node, pods, snapshot)
        report.add("recheck", self.clock() - t0)
        for pod, reason in refused:
            self._refuse(pod, node, reason, manifests)
        if not admitted:
            return 0
        t0 = self.clock()
        bound, failed = binder.bind_all(
            self.kube,
            self._bind_pool,
            self.state,
            node,
            admitted,
            on_event=binder.pod_event(self.kube, provisioner, self._event_pool),
        )
        elapsed = self.clock() - t0
        report.add("binds", elapsed)
        metrics.BIND.labels(provisioner=provisioner).observe(elapsed)
        metrics.PODS_BOUND.labels(provisioner=provisioner).inc(len(bound))
        if failed:
            snapshot.forget(node, failed)
        if failed and manifests:
            # Back through the window: a failed bind is retried a batch later, never dropped.
            self.batcher.add({p.key: dict(manifests[p.key]) for p in failed if p.key in manifests})
        return len(bound)

    def _recheck(
        self, node: str, pods: Sequence[Pod], snapshot: BindSnapshot
    ) -> tuple[list[Pod], list[tuple[Pod, str]]]:
        """kube-scheduler's Filter for each pod on the node as it is now (read again, with the pods
        bound to it now) and the batch's picture of the rest of the cluster."""
        try:
            manifest = kube_nodes.read_node(self.kube, node)
            if manifest is None:
                return [], [(p, f"node {node} is gone") for p in pods]
            on_node = kube_pods.list_on_node(self.kube, node)
        except Exception as err:  # the bind itself fails (and is retried) if the apiserver is away
            log.warning("Re-reading node %s before binding failed, binding as planned, %s", node, err)
            return list(pods), []
        marked = self.state.marked()
        if not inventory.takes_pods(manifest, marked):
            snapshot.forget(node, pods)
            why = marked.get(node) or ("deleting" if objects.deleting(manifest) else "cordoned")
            return [], [(p, f"node {node} takes no more pods ({why})") for p in pods]
        live = inventory.existing_node(
            manifest, inventory.parse_pods(on_node), pod_count=len(on_node), schedulable=True
        )
        return snapshot.admit(live, pods)

    def _refuse(
        self, pod: Pod, node: str, reason: str, manifests: Mapping[str, Mapping[str, Any]] | None
    ) -> None:
        """A pod the re-check refused stays pending: the next batch plans it against the cluster as
        it has become; refused again soon after, it waits for the parked retry instead."""
        log.info("Not binding pod %s to node %s, %s", pod.key, node, reason)
        self._pod_event(pod, NOT_BINDING_REASON, f"not binding to node {node}, {reason}")
        with self._refused_lock:  # launch groups bind from the launch pool
            refusals = self._refused.get(pod.key, 0) + 1
            self._refused[pod.key] = refusals
        if not manifests or pod.key not in manifests:
            return
        manifest = {pod.key: dict(manifests[pod.key])}
        if refusals > 1:
            self._parked.update(manifest)
        else:
            self.batcher.add(manifest)

    # -- helpers ---------------------------------------------------------------------------------

    def _parse(self, manifest: Mapping[str, Any]) -> Pod | None:
        try:
            return Pod.from_manifest(manifest)
        except PodError as err:
            log.debug("Ignoring pod, %s", err)
            return None

    def _parse_pending(self, manifest: Mapping[str, Any]) -> Pod | None:
        """A pending pod of a batch; one karpy cannot read gets an Event and is left out."""
        try:
            return Pod.from_manifest(manifest)
        except PodError as err:
            meta = manifest.get("metadata") or {}
            pod = Pod(
                namespace=str(meta.get("namespace") or "default"),
                name=str(meta.get("name") or ""),
                uid=str(meta.get("uid") or ""),
            )
            self._report(pod, INVALID_POD_REASON, f"not provisioning for this pod, {err}")
            return None

    def _report(self, pod: Pod, reason: str, message: str) -> None:
        """Log and record (Warning Event) why karpy will not provision for `pod`, once per
        REPORT_TTL_SECONDS for the same pod and message."""
        key = (pod.uid or pod.key, message)
        if key in self._reported:
            log.debug("Ignoring pod %s, %s", pod.key, message)
            return
        self._reported[key] = True
        log.info("Ignoring pod %s, %s", pod.key, message)
        self._pod_event(pod, reason, message)

    def _pod_event(self, pod: Pod, reason: str, message: str) -> None:
        self._event_pool.submit(
            events.record,
            self.kube,
            kind="Pod",
            name=pod.name,
            namespace=pod.namespace,
            uid=pod.uid,
            reason=reason,
            message=message,
            warning=True,
        )

    def _park(self, group: launcher.LaunchGroup, manifests: Mapping[str, Mapping[str, Any]] | None) -> None:
        if manifests:
            self._parked.update({p.key: dict(manifests[p.key]) for n in group.nodes for p in n.pods})

    def _note_unavailable(self, offerings: Sequence[OfferingKey]) -> None:
        for key in offerings:
            self.unavailable[key] = True

    def _log_plan(self, plan: Plan, ctx: _Context, manifests: Mapping[str, Mapping[str, Any]]) -> None:
        for line in plan.describe():
            if not line.startswith("Unable to schedule"):
                log.info("%s", line)
        limited: dict[str, str] = {}
        for item in plan.unschedulable:
            if item.unmodelled:
                # Never bound and not parked: the rule is in the pod's spec, waiting changes nothing.
                self._report(item.pod, UNMODELLED_REASON, item.reason)
                continue
            log.info("Unable to schedule pod %s, %s", item.pod.key, item.reason)
            events.record(
                self.kube,
                kind="Pod",
                name=item.pod.name,
                namespace=item.pod.namespace,
                uid=item.pod.uid,
                reason="FailedProvisioning",
                message=item.reason,
                warning=True,
            )
            if "limits exceeded" in item.reason:
                name = item.reason.split()[1]
                limited.setdefault(name, item.reason)
            if item.pod.key in manifests:
                self._parked[item.pod.key] = dict(manifests[item.pod.key])
        for name, reason in limited.items():
            if name in ctx.provisioners:
                self._provisioner_event(ctx.provisioners[name], "LimitExceeded", reason, warning=True)

    def _provisioner_event(
        self, provisioner: Provisioner, reason: str, message: str, *, warning: bool = False
    ) -> None:
        events.record(
            self.kube,
            kind="Provisioner",
            api_version=kube_provisioners.GROUP + "/" + kube_provisioners.VERSION,
            name=provisioner.name,
            uid=provisioner.uid,
            reason=reason,
            message=message,
            warning=warning,
        )

    def _update_status(self, ctx: _Context) -> None:
        self.refresh_status(ctx.provisioners)

    def refresh_status(self, provisioner_names: Iterable[str]) -> None:
        """Publish status.resources from live + in-flight nodes; lifecycle calls it after removing a node."""
        usage = inventory.usage(kube_nodes.list_karpy_nodes(self.kube))
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
            except Exception as err:  # status is informational
                log.debug("Failed to update status of provisioner %s, %s", name, err)

    def _unpark(self, *, now: bool = False) -> None:
        if self._parked and (now or self.clock() - self._parked_at >= PARKED_RETRY_SECONDS):
            parked, self._parked = self._parked, {}
            self._parked_at = self.clock()
            self.batcher.add(parked)


def _topology_only(nodes: Sequence[ExistingNode], leaving: set[str]) -> list[ExistingNode]:
    """Replacements for pods leaving a node go on new nodes: every node only counts for topology,
    without the leaving pods (they are about to be evicted)."""
    return [
        dataclasses.replace(n, schedulable=False, pods=tuple(p for p in n.pods if p.key not in leaving))
        for n in nodes
    ]


__all__ = ["BatchReport", "PlannedNode", "ProvisioningController"]
