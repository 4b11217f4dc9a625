"""Wiring of the lifecycle workers: node worker, watches, GC, interruption poller, crash recovery.

`start_lifecycle` starts threads that act only while `is_leader()`; every replica keeps its watches
warm, and a replica that becomes leader enqueues every node and recovers in-flight launches first.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

from kubernetes import client

from extender.api import labels
from extender.cloud.types import CloudProvider, OfferingKey
from extender.cluster.informer import start_informer
from extender.cluster.nodes import list_karpy_nodes
from extender.lifecycle import gc, metrics, recovery
from extender.lifecycle.consolidation.worker import Consolidator
from extender.lifecycle.context import Context, RemovalMarks, Replacements, utcnow
from extender.lifecycle.events import Recorder
from extender.lifecycle.interruption import InterruptionHandler, InterruptionPoller
from extender.lifecycle.nodes import NodeWorker
from extender.lifecycle.provisioners import ProvisionerLookup
from extender.settings import Settings

NODE_WORKERS = 4


def _thread(target: Callable[..., None], *args: Any, name: str) -> threading.Thread:
    thread = threading.Thread(target=target, args=args, name=name, daemon=True)
    thread.start()
    return thread


class Lifecycle:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        lookup = ProvisionerLookup(ctx.kube, settings=ctx.settings)
        self.nodes = NodeWorker(ctx, lookup.get)
        self._was_leader = False
        #: Nodes created at the last leadership start for instances of interrupted launches.
        self.recovered: list[str] = []

    def supervise(self, stop: threading.Event) -> None:
        """Leadership transitions, periodic resync and GC, on one slow loop."""
        s = self.ctx.settings.lifecycle
        last_resync = last_gc = 0.0
        tick = 0.0
        while not stop.is_set():
            leader = self.ctx.is_leader()
            metrics.IS_LEADER.set(1 if leader else 0)
            if leader and not self._was_leader:
                self._on_started_leading()
                last_resync = tick
            self._was_leader = leader
            if leader and tick - last_resync >= s.resync_seconds:
                self.nodes.enqueue_all()
                last_resync = tick
            if leader and tick - last_gc >= s.gc_interval_seconds:
                self._collect()
                last_gc = tick
            stop.wait(1.0)
            tick += 1.0

    def _on_started_leading(self) -> None:
        try:
            self.recovered = recovery.recover(self.ctx)
        except Exception:
            self.ctx.log.exception("Recovering in-flight launches")
        for node in list_karpy_nodes(self.ctx.kube):
            self.nodes.on_node("SYNC", node)

    def _collect(self) -> None:
        try:
            gc.collect(self.ctx)
        except Exception:
            self.ctx.log.exception("Garbage collection")


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
) -> list[threading.Thread]:
    """Start the lifecycle threads; they exit when `stop` is set."""
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
    lifecycle = Lifecycle(ctx)
    core = client.CoreV1Api(kube)
    threads = [
        start_informer(
            core.list_node,
            lifecycle.nodes.on_node,
            stop,
            name="nodes",
            label_selector=labels.PROVISIONER_NAME,
        ),
        start_informer(
            core.list_pod_for_all_namespaces,
            lifecycle.nodes.on_pod,
            stop,
            name="pods",
            field_selector="spec.nodeName!=",
        ),
        _thread(lifecycle.supervise, stop, name="lifecycle-supervisor"),
    ]
    threads += [_thread(lifecycle.nodes.run, stop, name=f"lifecycle-node-{i}") for i in range(NODE_WORKERS)]
    # Consolidation (issue 12): shares the node worker's disruption budgets.
    consolidator = Consolidator(ctx, lifecycle.nodes.ledger, lifecycle.nodes.census)
    threads.append(_thread(consolidator.run, stop, name="lifecycle-consolidation"))
    if settings.aws.interruption_queue:
        handler = InterruptionHandler(ctx, lambda: list_karpy_nodes(ctx.kube))
        poller = InterruptionPoller(
            ctx, sqs or _sqs_client(settings), settings.aws.interruption_queue, handler
        )
        threads.append(_thread(poller.run, stop, name="lifecycle-interruption"))

    def close_on_stop() -> None:
        stop.wait()
        lifecycle.nodes.queue.close()

    threads.append(_thread(close_on_stop, name="lifecycle-closer"))
    return threads
