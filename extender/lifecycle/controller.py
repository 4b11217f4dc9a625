"""Wiring of the lifecycle workers: node worker, watches, GC, interruption poller, crash recovery.

`start_lifecycle` starts threads that act only while `is_leader()`; every replica keeps its watches
warm, and a replica that becomes leader enqueues every node and recovers in-flight launches first.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from kubernetes import client

from extender.api import labels
from extender.cloud.types import CloudProvider, OfferingKey
from extender.cluster.boundpods import BoundPods
from extender.cluster.informer import start_informer
from extender.cluster.nodes import list_karpy_nodes
from extender.heartbeat import Heartbeats, no_tick
from extender.lifecycle import gc, metrics, recovery
from extender.lifecycle.consolidation.worker import Consolidator
from extender.lifecycle.context import Context, RemovalMarks, Replacements, utcnow
from extender.lifecycle.events import Recorder
from extender.lifecycle.interruption import InterruptionHandler, InterruptionPoller
from extender.lifecycle.nodes import NodeWorker
from extender.lifecycle.provisioners import ProvisionerLookup
from extender.lifecycle.workqueue import DelayQueue
from extender.loops import run_forever
from extender.retry import LoopBackoff
from extender.settings import Settings

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
    ) -> None:
        self.ctx = ctx
        lookup = ProvisionerLookup(ctx.kube, settings=ctx.settings)
        self.nodes = NodeWorker(ctx, lookup.get, queue=queue)
        self._monotonic = monotonic
        self._was_leader = False
        self._last_resync = self._last_gc = monotonic()
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
            self._last_resync = self._monotonic()
        if self._monotonic() - self._last_gc >= s.gc_interval_seconds:
            self._doing = "collecting garbage"
            gc.collect(self.ctx)
            self._last_gc = self._monotonic()
        self._doing = "supervising lifecycle"
        return SUPERVISE_SECONDS

    def _on_started_leading(self) -> None:
        self._doing = "recovering in-flight launches"
        self.recovered = recovery.recover(self.ctx)
        self._doing = "listing karpy nodes at leadership start"
        for node in list_karpy_nodes(self.ctx.kube):
            self.nodes.track("SYNC", node)


def _sqs_client(settings: Settings) -> Any:
    from extender.cloud.aws.session import make_clients

    return make_clients(settings.aws).sqs


def start_lifecycle(
    *,
    settings: Settings,
    kube: Any,
    cloud: CloudProvider,
    state: RemovalMarks | None,
    provisioning: Replacements | None,
    is_leader: Callable[[], bool],
    stop: threading.Event,
    clock: Callable[[], datetime] = utcnow,
    recorder: Recorder | None = None,
    sqs: Any = None,
    unavailable: Callable[[OfferingKey], None] | None = None,
    heartbeats: Heartbeats | None = None,
    bound_pods: BoundPods | None = None,
) -> list[threading.Thread]:
    """Start the lifecycle threads; they exit when `stop` is set. Each registers in `heartbeats`
    (read by the extender's /healthz) with its deadline from DEADLINES.

    `bound_pods`: the bound-pod index shared with provisioning, whose creator starts its watch;
    without it the lifecycle keeps (and watches) one of its own."""
    beats = heartbeats or Heartbeats()

    def tick(worker: str) -> Callable[[], None]:
        return beats.register(worker, DEADLINES[worker])

    if unavailable is None:
        unavailable = getattr(provisioning, "mark_unavailable", None) or getattr(
            state, "mark_unavailable", None
        )
    ctx = Context(
        settings=settings,
        kube=kube,
        cloud=cloud,
        state=state,
        provisioning=provisioning,
        recorder=recorder or Recorder(kube),
        is_leader=is_leader,
        clock=clock,
        unavailable=unavailable,
    )
    lifecycle = Lifecycle(ctx, queue=_TickingQueue(tick("lifecycle-node-workers")))
    supervisor_tick = tick("lifecycle-supervisor")
    core = client.CoreV1Api(kube)
    threads = [
        start_informer(
            core.list_node,
            lifecycle.nodes.on_node,
            stop,
            name="nodes",
            tick=tick("informer-nodes"),
            label_selector=labels.PROVISIONER_NAME,
        ),
        _thread(lambda: lifecycle.supervise(stop, tick=supervisor_tick), name="lifecycle-supervisor"),
    ]
    threads += [_thread(lifecycle.nodes.run, stop, name=f"lifecycle-node-{i}") for i in range(NODE_WORKERS)]
    # A pod bound, finished or deleted may leave its node empty: the node worker looks again.
    pods = bound_pods if bound_pods is not None else BoundPods()
    pods.subscribe(lifecycle.nodes.on_pod)
    if bound_pods is None:
        threads.append(pods.start(kube, stop, tick=tick("informer-pods")))
    # Consolidation (issue 12): shares the node worker's disruption budgets.
    consolidator = Consolidator(ctx, lifecycle.nodes.ledger, lifecycle.nodes.census, bound=pods)
    threads.append(_thread(consolidator.run, stop, name="lifecycle-consolidation"))
    if settings.aws.interruption_queue:
        handler = InterruptionHandler(ctx, lambda: list_karpy_nodes(ctx.kube))
        poller = InterruptionPoller(
            ctx, sqs or _sqs_client(settings), settings.aws.interruption_queue, handler
        )
        poll_tick = tick("lifecycle-interruption")
        threads.append(_thread(lambda: poller.run(stop, tick=poll_tick), name="lifecycle-interruption"))

    def close_on_stop() -> None:
        stop.wait()
        lifecycle.nodes.queue.close()

    threads.append(_thread(close_on_stop, name="lifecycle-closer"))
    return threads
