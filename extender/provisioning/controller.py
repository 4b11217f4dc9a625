"""The provisioning worker: the loop, leadership, and the entry points into the pipeline.

One loop thread takes batches of pod keys from the Batcher (fed by the pod watch, the extender's
fast path and retries) and runs each through the pipeline (`pipeline.py`: gather -> plan -> launch
-> register -> bind -> report); the lifecycle borrows the same pipeline through
`provision_replacements`. Launches run only while this replica leads. A second thread keeps static
NodePools at their replicas (`static.py`), under the same batch lock.

On start and on every gain of leadership the loop first adopts instances an interrupted launch left
without a Node (`adopt_instances`), before any batch is planned: the pending pods then pack onto
those nodes as existing capacity instead of being launched for again. Then it warms up again
(`warmup.py`: catalog, solver views, launch templates), which every replica first does at start.

Shared state and who guards it:
- `_lock` (the batch lock): one batch, one replacement launch or one adoption at a time; it guards
  the pipeline, so two of them never plan against the same cluster.
- `nodes` and `bound` (the node and bound-pod indexes): their own locks. The node index's watch
  runs from `start`; the bound-pod index's creator (the process wiring, extender/main.py, which
  shares it with the lifecycle) starts its watch.
- `_fast_path` under `_fast_lock`: keys the extender enqueued, read and cleared by each batch.
- `parked` (`parking.Parked`), `unavailable` (`offerings.UnavailableOfferings`), the reporter's and
  the binder's TTL caches: each guards itself, since launch and bind threads write them.
- `reports`: written only by the loop thread (readers copy the list).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kubernetes import client

from extender import retry
from extender.api.pod import Pod
from extender.api.provisioner import Provisioner
from extender.cloud.types import CloudProvider
from extender.cluster import inventory
from extender.cluster import pool_resources as kube_provisioners
from extender.cluster.boundpods import BoundPods
from extender.cluster.nodeindex import NodeIndex
from extender.cluster.nodeoverlays import NodeOverlays
from extender.cluster.objects import pod_key
from extender.loops import log_failure, run_forever
from extender.provisioning import metrics
from extender.provisioning.backoff import REGISTRATION_FAILED, LaunchBackoff
from extender.provisioning.batcher import Batcher
from extender.provisioning.bind import Binder
from extender.provisioning.gather import Gatherer
from extender.provisioning.launch import Launcher
from extender.provisioning.nominate import Nominations
from extender.provisioning.offerings import UnavailableOfferings
from extender.provisioning.overlays import Overlays
from extender.provisioning.parking import Parked
from extender.provisioning.pipeline import Pipeline
from extender.provisioning.pools import Pools
from extender.provisioning.register import Registrar
from extender.provisioning.report import BatchReport, Reporter
from extender.provisioning.startup import StartupTracker
from extender.provisioning.static import STATIC_SECONDS, StaticCapacity
from extender.provisioning.warmup import Warmup
from extender.provisioning.watcher import PodWatcher
from extender.scheduling.instancetypes import OfferingKey
from extender.scheduling.plan import PlannedNode
from extender.settings import Settings
from extender.state import ClusterState

log = logging.getLogger("karpy.controller.provisioning")

#: A follower looks at its leadership this often, so it adopts and provisions soon after gaining it.
FOLLOWER_POLL_SECONDS = 0.5


class ProvisioningController:
    """`bound`: the bound-pod index, shared with the lifecycle; its creator starts its watch."""

    def __init__(
        self,
        *,
        settings: Settings,
        kube: client.ApiClient,
        cloud: CloudProvider,
        state: ClusterState,
        bound: BoundPods,
        is_leader: Callable[[], bool] = lambda: True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.kube = kube
        self.cloud = cloud
        self.state = state
        self.bound = bound
        self.is_leader = is_leader
        self.clock = clock
        self.batcher = Batcher(settings.batching, clock)
        self.watcher = PodWatcher(kube, on_pods=self._watched, on_synced=state.set_ready)
        self.nodes = NodeIndex()
        self.unavailable = UnavailableOfferings(clock)
        self.parked = Parked(clock)
        self.pools = Pools()
        #: NodeOverlays: watched, resolved per batch, their status written by the leader.
        self.overlays = Overlays(NodeOverlays(kube), is_leader)
        self.reports: list[BatchReport] = []
        self._lock = threading.Lock()
        self._fast_path: set[str] = set()
        self._fast_lock = threading.Lock()
        reporter = Reporter(kube, self.pools, clock)
        #: Pools whose launches failed for good, not launched for until their backoff passes.
        self.backoff = LaunchBackoff(clock, reporter.pool_backoff)
        deadline = settings.scheduler_bind_deadline_seconds
        self.nominations = Nominations(
            kube=kube, state=state, reporter=reporter, clock=clock, deadline_seconds=deadline
        )
        # A pod bound (the index) or deleted (the pending watch) ends the room held for it.
        self.bound.subscribe(self.nominations.bound)
        self.watcher.on_gone = self.nominations.gone
        self.watcher.on_seen = self.nominations.seen
        self.startup = StartupTracker(
            self._provisioner_of, is_leader=is_leader, clock=time.time, monotonic=clock
        )
        self.bound.subscribe_manifests(self.startup.on_bound)
        self.pipeline = self._pipeline(reporter)
        self.static = StaticCapacity(
            kube=kube,
            settings=settings,
            state=state,
            nodes=self.nodes,
            bound=self.bound,
            context=self.pipeline.gather.context,
            unavailable=self.unavailable.current,
            launch=self.pipeline.launch_nodes,
        )
        #: Set once this replica leads and has adopted interrupted launches: static pools count
        #: adopted nodes before launching (cleared when leadership is lost).
        self._adopted = threading.Event()
        self.warmup = Warmup(
            gather=self.pipeline.gather,
            cloud=cloud,
            informers=(lambda: state.ready, self.nodes.synced.is_set, self.bound.synced.is_set),
        )
        self._stopping = threading.Event()

    def _pipeline(self, reporter: Reporter) -> Pipeline:
        """The stages, each handed the shared pieces it reads or writes."""
        settings, kube, cloud, state, clock = self.settings, self.kube, self.cloud, self.state, self.clock
        return Pipeline(
            gather=Gatherer(
                kube=kube,
                settings=settings,
                cloud=cloud,
                state=state,
                reporter=reporter,
                bound=self.bound,
                nodes=self.nodes,
                nominations=self.nominations,
                overlays=self.overlays,
            ),
            launch=Launcher(
                cloud=cloud,
                is_leader=self.is_leader,
                unavailable=self.unavailable,
                reporter=reporter,
                clock=clock,
                backoff=self.backoff,
            ),
            register=Registrar(
                kube=kube,
                region=settings.aws.region,
                reporter=reporter,
                clock=clock,
                created=self.nodes.assume,
                cloud=cloud,
                backoff=self.backoff,
            ),
            bind=Binder(
                kube=kube,
                state=state,
                pools=self.pools,
                reporter=reporter,
                clock=clock,
                requeue=self._requeue,
                park=self.parked.park,
                assume=self.bound.assume,
                nominations=self.nominations,
            ),
            report=reporter,
            unavailable=self.unavailable,
            pools=self.pools,
            park=self.parked.park,
            clock=clock,
        )

    # -- entry points ----------------------------------------------------------------------------

    def _watched(self, pods: Mapping[str, Mapping[str, Any]]) -> None:
        """Pods from the watch, less those a batch is placing now: kube-scheduler's refusal of a
        claimed pod updates it, and it would only open a second window. A batch binds, parks or
        re-adds every pod it claimed."""
        for pod in pods.values():
            self.startup.pending(pod)
        self._requeue(key for key in pods if not self.state.claimed(key))

    def _requeue(self, keys: Iterable[str]) -> list[str]:
        """Put pod keys into the batching window; the keys that were not in it yet."""
        return self.batcher.add(dict.fromkeys(keys))

    def enqueue(self, pods: Sequence[Mapping[str, Any]]) -> None:
        """Fast path: pods (API JSON) the extender's guard left without a node."""
        for pod in pods:
            self.startup.pending(pod)
        new = self._requeue(pod_key(p) for p in pods)
        with self._fast_lock:
            self._fast_path.update(new)

    def _provisioner_of(self, node_name: str) -> str | None:
        node = self.nodes.get(node_name)
        return node.provisioner if node is not None else None

    def mark_unavailable(self, key: OfferingKey) -> None:
        self.unavailable.mark([key])

    def start(self, stop: threading.Event) -> list[threading.Thread]:
        # The catalog, the solver's views of it and the launch prerequisites take seconds to
        # resolve: now (warmup.py, `/readyz` waits for it) rather than inside the first batch.
        self._stopping = stop
        warm = threading.Thread(target=self.warmup.run, args=(stop,), name="warm-up", daemon=True)
        warm.start()
        loop = threading.Thread(target=self.run, args=(stop,), name="provisioning", daemon=True)
        loop.start()
        status = threading.Thread(
            target=self.overlays.run,
            args=(stop, self.gather_pools, lambda: self.cloud.get_instance_types(None)),
            name="nodeoverlay-status",
            daemon=True,
        )
        status.start()
        overlays = self.overlays.index.start(stop)
        static = threading.Thread(target=self.run_static, args=(stop,), name="static-capacity", daemon=True)
        static.start()
        threads = [self.watcher.start(stop), self.nodes.start(self.kube, stop), loop, warm, overlays, status]
        return [*threads, static]

    def gather_pools(self) -> list[Provisioner]:
        """Every configured Provisioner and NodePool, as a batch lists them."""
        return kube_provisioners.list_configured(self.kube, self.settings)

    def run_static(self, stop: threading.Event) -> None:
        """Keep every static NodePool at its replicas (static.py), one pass every STATIC_SECONDS on
        the leader, under the batch lock: a batch never plans while its nodes are being launched."""

        def one_pass() -> float:
            if self.is_leader() and self._adopted.is_set():
                # Listed before the lock: the listing is I/O a batch should not wait behind, and a
                # cluster without static pools never takes the lock for them.
                pools = self.static.static_pools()
                if pools:
                    with self._lock:
                        self.static.reconcile(pools)
            return STATIC_SECONDS

        run_forever(one_pass, stop, doing="keeping static nodepools at their replicas", logger=log)

    def run(self, stop: threading.Event, *, backoff: retry.LoopBackoff | None = None) -> None:
        """One batch a pass until `stop`; a failed batch is parked (its pods come back after their
        own backoff) and the next pass waits the loop's backoff."""
        log.info("Waiting for unschedulable pods")
        leading = False

        def one_pass() -> None:
            nonlocal leading
            if self.is_leader() != leading:
                if not leading:
                    self._on_started_leading()  # a failed start is retried in full next pass
                    self._adopted.set()
                else:
                    self._adopted.clear()
                leading = not leading
            self._requeue(self.parked.take())
            self.nominations.expire()
            if leading:
                batch, waited = self.batcher.wait(stop, idle_return=self._idle_seconds(leading))
            else:
                # Leadership gained while pods wait in the window is taken up at once (adoption,
                # warm-up) while their window runs: they are not parked for a window of their own.
                batch, waited = self.batcher.wait(
                    stop, FOLLOWER_POLL_SECONDS / 5, idle_return=FOLLOWER_POLL_SECONDS, until=self.is_leader
                )
            if not batch:
                return
            # `leading`, not only is_leader(): leadership gained during the wait has not adopted the
            # interrupted launches yet; the batch waits one turn, for the adoption at the top.
            if not (leading and self.is_leader()):
                self.parked.park(batch)
                return
            log.info("Batched %d pods in %.3fs", len(batch), waited)
            metrics.BATCH_WAIT.observe(waited)
            metrics.BATCH_PODS.observe(len(batch))
            try:
                report = self.provision(batch)
            except Exception:
                self.parked.park(batch)
                raise
            report.timings["batch_wait"] = waited

        run_forever(one_pass, stop, doing="provisioning", backoff=backoff, logger=log)

    def _idle_seconds(self, leading: bool) -> float:
        """How long an empty window waits before the loop looks at leadership and parked pods again."""
        if not leading:
            return FOLLOWER_POLL_SECONDS
        dues = (self.parked.next_in(), self.nominations.next_in())
        due = min((t for t in dues if t is not None), default=None)
        return retry.PARKED.cap if due is None else min(max(due, FOLLOWER_POLL_SECONDS), retry.PARKED.cap)

    def _on_started_leading(self) -> None:
        try:
            self.adopt_instances()
        except Exception as err:  # the loop's boundary; GC bounds how long an unadopted instance lives
            # The world's failures (API server, AWS) are WARNINGs, karpy's own bugs ERRORs.
            log_failure(log, "adopting instances of interrupted launches", err)
        # A follower warmed up at its start; what expired since is fetched before the first batch.
        self.warmup.again(self._stopping)
        # Pods parked while following were waiting for exactly this.
        self._requeue(self.parked.take(everything=True))

    def adopt_instances(self) -> list[str]:
        """Create the Nodes of karpy instances that have none; the adopted node names.

        A controller killed between CreateFleet and the Node create leaves such an instance while
        its pods are still pending. Under the batch lock, so no batch plans those pods meanwhile;
        the next batch binds them to the adopted node as existing capacity. Both listings are taken
        under the lock (an instance listed before a wait for it may be gone by the end of the wait).
        """
        with self._lock:
            return self.pipeline.registrar.adopt(self.cloud.list, self.pipeline.gather.context)

    def provision_replacements(self, pods: Sequence[Pod]) -> list[str]:
        """Launch nodes (without binding) for pods of a node about to be drained; their names."""
        parsed = [p for p in pods if inventory.readable(p) is not None]
        if not parsed:
            return []
        with self._lock:
            return self.pipeline.replacements(parsed)

    def provision(self, batch: Iterable[str]) -> BatchReport:
        """One batch of pod keys through the pipeline."""
        keys = list(batch)
        with self._fast_lock:
            fast = frozenset(self._fast_path.intersection(keys))
            self._fast_path.difference_update(keys)
        report = BatchReport(fast_path=fast)
        started = self.clock()
        with self._lock:
            # Claimed before the re-read: from here the extender keeps kube-scheduler off these pods,
            # so none of them is placed twice and no node launched for them comes up empty.
            self.state.claim(keys)
            try:
                ctx = self.pipeline.provision(frozenset(keys), report)
            finally:
                self.state.unclaim(keys)
                self.state.batch_done()
        if ctx is None:
            return report
        elapsed = self.clock() - started
        for name in ctx.provisioners:
            metrics.SCHEDULING.labels(provisioner=name).observe(elapsed)
        self.reports = [*self.reports[-99:], report]
        return report

    def refresh_status(self, provisioner_names: Iterable[str]) -> None:
        """Publish status.resources from live + in-flight nodes; lifecycle calls it after removing a node."""
        self.pipeline.reporter.refresh_status(provisioner_names)

    def registration_failed(self, pool: Provisioner, message: str) -> None:
        """A node of `pool` never joined (lifecycle's registration TTL): back the pool off until a
        node of it joins or its spec changes (backoff.py)."""
        self.backoff.failed(pool, message, REGISTRATION_FAILED)

    def joined(self, pool: Provisioner) -> None:
        """A node of `pool` became Ready: whatever held the pool is over."""
        self.backoff.succeeded(pool, joined=True)


__all__ = ["BatchReport", "PlannedNode", "ProvisioningController"]
