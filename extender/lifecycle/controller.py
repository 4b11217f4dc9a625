"""The lifecycle workers: node worker, watches, GC, consolidation, interruption poller, crash recovery.

`LifecycleController.start` starts threads that act only while `is_leader()`; every replica keeps
its watches warm, and a replica that becomes leader enqueues every node and recovers in-flight
launches first. The process wiring (extender/main.py) builds it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from kubernetes import client

from extender.api import labels, nodeclaim
from extender.api.provisioner import Provisioner
from extender.cluster import nodeclaims
from extender.cluster.boundpods import BoundPods
from extender.cluster.informer import Crd, start_informer
from extender.cluster.nodes import list_karpy_nodes
from extender.heartbeat import Heartbeats, no_tick
from extender.lifecycle import gc, metrics, recovery
from extender.lifecycle.consolidation.worker import Consolidator
from extender.lifecycle.context import Context
from extender.lifecycle.interruption import InterruptionHandler, InterruptionPoller
from extender.lifecycle.nodeclaim_deletion import ClaimTerminator
from extender.lifecycle.nodes import NodeWorker
from extender.lifecycle.pool_lookup import ProvisionerLookup
from extender.lifecycle.reservation_expiry import ReservationExpiry
from extender.lifecycle.workqueue import DelayQueue
from extender.loops import run_forever
from extender.retry import LoopBackoff

NODE_WORKERS = 4
SUPERVISE_SECONDS = 1.0
#: Seconds within which each worker must complete a pass before /healthz reports the replica stuck:
#: well above a pass's normal length (a GC pass lists every instance, a relist at 50,000 pods takes
#: tens of seconds) plus the longest backoff (60 s), so only a hung or dead thread trips it.
DEADLINES = {
    "lifecycle-supervisor": 300.0,
    "lifecycle-node-workers": 300.0,
    "lifecycle-interruption": 300.0,
    "informer-nodes": 300.0,
    "informer-nodes-nodepool": 300.0,
    "informer-nodeclaims": 300.0,
    "informer-pods": 300.0,
}


def _thread(target: Callable[..., None], *args: Any, name: str) -> threading.Thread:
    thread = threading.Thread(target=target, args=args, name=name, daemon=True)
    thread.start()
    return thread


class _TickingQueue(DelayQueue[str]):
    """The node workers' queue; every `get` (a worker back for more, idle or not) is a heartbeat."""

    def __init__(self, tick: Callable[[], None]) -> None:
        super().__init__()
        self._tick = tick

    def get(self, timeout: float | None = None) -> str | None:
        self._tick()
        return super().get(timeout)


class Lifecycle:
    def __init__(
        self,
        ctx: Context,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        queue: DelayQueue[str] | None = None,
        provisioners: Callable[[], list[Provisioner]] | None = None,
    ) -> None:
        self.ctx = ctx
        lookup = ProvisionerLookup(ctx.kube, settings=ctx.settings, lister=provisioners)
        self.nodes = NodeWorker(ctx, lookup.get, queue=queue, fresh=lookup.fresh)
        #: `kubectl delete nodeclaim`: terminates the claim's node.
        self.claims = ClaimTerminator(ctx)
        #: Capacity blocks about to end: their nodes drained and replaced.
        self.reservation_expiry = ReservationExpiry(ctx)
        self._monotonic = monotonic
        self._was_leader = False
        self._last_resync = self._last_gc = self._last_reservations = monotonic()
        self._doing = "supervising lifecycle"
        #: Nodes created at the last leadership start for instances of interrupted launches.
        self.recovered: list[str] = []

    def supervise(
        self, stop: threading.Event, *, tick: Callable[[], None] = no_tick, backoff: LoopBackoff | None = None
    ) -> None:
        """Leadership transitions, periodic resync and GC, one pass a second; survives any error
        (a failed step is retried after backoff: a failed leadership start runs again in full)."""
        run_forever(
            self.supervise_once,
            stop,
            doing=lambda: self._doing,
            tick=tick,
            backoff=backoff,
            logger=self.ctx.log,
        )

    def supervise_once(self) -> float:
        s = self.ctx.settings.lifecycle
        leader = self.ctx.is_leader()
        metrics.IS_LEADER.set(1 if leader else 0)
        if not leader:
            self._was_leader = False
            return SUPERVISE_SECONDS
        if not self._was_leader:
            self._on_started_leading()
            self._was_leader = True
            self._last_resync = self._monotonic()
        if self._monotonic() - self._last_resync >= s.resync_seconds:
            self.nodes.enqueue_all()
            self.claims.enqueue_all()
            self._last_resync = self._monotonic()
        if self._monotonic() - self._last_gc >= s.gc_interval_seconds:
            self._doing = "collecting garbage"
            gc.collect(self.ctx)
            self._last_gc = self._monotonic()
        if self._monotonic() - self._last_reservations >= s.reservation_check_seconds:
            self._doing = "checking capacity reservations"
            self.reservation_expiry.run_once()
            self._last_reservations = self._monotonic()
        self._doing = "supervising lifecycle"
        return SUPERVISE_SECONDS

    def _on_started_leading(self) -> None:
        self._doing = "recovering in-flight launches"
        self.recovered = recovery.recover(self.ctx)
        self._doing = "listing karpy nodes at leadership start"
        for node in list_karpy_nodes(self.ctx.kube):
            self.nodes.track("SYNC", node)
        self.claims.enqueue_all()


class LifecycleController:
    """The lifecycle's threads, built from the Context and the bound-pod index they share with
    provisioning; `start` runs them. They act only while `ctx.is_leader()`; each ticks its entry
    in `heartbeats` (read by the extender's /healthz) with its deadline from DEADLINES.

    `sqs`: the client of `settings.aws.interruption_queue`, None when no queue is configured."""

    def __init__(
        self,
        ctx: Context,
        *,
        bound: BoundPods,
        heartbeats: Heartbeats,
        sqs: Any = None,
    ) -> None:
        self.ctx = ctx
        self.heartbeats = heartbeats
        queue = _TickingQueue(self._tick("lifecycle-node-workers"))
        self.lifecycle = Lifecycle(ctx, queue=queue)
        # A pod bound, finished or deleted may leave its node empty: the node worker looks again.
        bound.subscribe(self.lifecycle.nodes.on_pod)
        # Consolidation (issue 12): shares the node worker's disruption budgets.
        nodes = self.lifecycle.nodes
        self.consolidator = Consolidator(
            ctx,
            nodes.ledger,
            nodes.census,
            bound=bound,
            pod_events=nodes.pod_events,
            claims=nodes.claims,
        )
        self.poller: InterruptionPoller | None = None
        if sqs is not None:
            handler = InterruptionHandler(ctx, lambda: list_karpy_nodes(ctx.kube))
            self.poller = InterruptionPoller(ctx, sqs, ctx.settings.aws.interruption_queue, handler)

    def _tick(self, worker: str) -> Callable[[], None]:
        return self.heartbeats.register(worker, DEADLINES[worker])

    def start(self, stop: threading.Event) -> list[threading.Thread]:
        """Start the threads; they exit when `stop` is set. The bound-pod index's watch is its
        creator's to start (the index is shared), once this has subscribed to it."""
        lifecycle = self.lifecycle
        supervisor_tick = self._tick("lifecycle-supervisor")
        # One informer per owner label (a Provisioner's nodes, a NodePool's): a selector cannot OR keys.
        threads = [
            start_informer(
                client.CoreV1Api(self.ctx.kube).list_node,
                lifecycle.nodes.on_node,
                stop,
                name=name,
                tick=self._tick(f"informer-{name}"),
                label_selector=key,
            )
            for key, name in ((labels.PROVISIONER_NAME, "nodes"), (labels.NODEPOOL, "nodes-nodepool"))
        ]
        threads.append(
            start_informer(
                nodeclaims.lister(self.ctx.kube),
                lifecycle.claims.on_claim,
                stop,
                name="nodeclaims",
                tick=self._tick("informer-nodeclaims"),
                crd=Crd(self.ctx.kube, nodeclaim.GROUP, nodeclaim.VERSION, nodeclaims.PLURAL),
            )
        )
        threads += [
            _thread(lambda: lifecycle.supervise(stop, tick=supervisor_tick), name="lifecycle-supervisor"),
            _thread(lifecycle.claims.run, stop, name="lifecycle-nodeclaims"),
        ]
        threads += [
            _thread(lifecycle.nodes.run, stop, name=f"lifecycle-node-{i}") for i in range(NODE_WORKERS)
        ]
        threads.append(_thread(self.consolidator.run, stop, name="lifecycle-consolidation"))
        poller = self.poller
        if poller is not None:
            poll_tick = self._tick("lifecycle-interruption")
            threads.append(_thread(lambda: poller.run(stop, tick=poll_tick), name="lifecycle-interruption"))

        def close_on_stop() -> None:
            stop.wait()
            lifecycle.nodes.queue.close()
            lifecycle.claims.queue.close()

        threads.append(_thread(close_on_stop, name="lifecycle-closer"))
        return threads
