"""`karpy controller` wiring, the one place that knows it: `build` makes the kube client, the cloud
provider, the state, the leader elector, the bound-pod index, provisioning and the lifecycle;
`Controller.start` starts them in order. gunicorn serves the extender app in the same process, so
ClusterState is shared.

Everything is built in gunicorn's worker (after the fork), where the app is loaded; the worker's
exit sets `stop`, which ends the watch, batch, lifecycle and leader-election threads.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from flask import Flask
from kubernetes import client

from extender.cloud.aws.provider import AWSCloudProvider
from extender.cloud.aws.session import make_clients
from extender.cloud.metrics import decorate
from extender.cluster import client as kube_client
from extender.cluster import v1status
from extender.cluster.boundpods import BoundPods
from extender.cluster.leaderlabel import LeaderLabel
from extender.cluster.version import ServerVersion
from extender.cluster.version import read as server_version
from extender.heartbeat import Heartbeats
from extender.http import limits
from extender.http.app import by_port, create_app, create_metrics_app
from extender.lifecycle.context import Context
from extender.lifecycle.controller import DEADLINES, LifecycleController
from extender.lifecycle.events import Recorder
from extender.lifecycle.leader import LeaderElector
from extender.loops import run_forever
from extender.observe import Observer
from extender.provisioning.controller import ProvisioningController
from extender.serve import serve
from extender.settings import Settings
from extender.state import ClusterState

log = logging.getLogger("karpy.controller")


Callback = Callable[[], None]


def _leader_label(kube: client.ApiClient, settings: Settings) -> tuple[Callback | None, Callback | None]:
    """Elector callbacks that keep the leader's pod the extender Service's only endpoint."""
    s = settings.leader_election
    if not s.pod_name:
        return None, None
    label = LeaderLabel(kube, s.namespace, s.pod_name)
    label.set(False)  # a restarted container keeps its pod's labels

    def started() -> None:
        label.set(True)

    def stopped() -> None:
        label.set(False)

    return started, stopped


@dataclass
class Controller:
    """Everything `karpy controller` runs in one process, built by `build`, started by `start`."""

    kube: client.ApiClient
    state: ClusterState
    elector: LeaderElector | None
    bound: BoundPods
    provisioning: ProvisioningController
    lifecycle: LifecycleController
    heartbeats: Heartbeats
    observer: Observer | None = None
    #: One pass writing the status of every NodePool and EC2NodeClass (leader only).
    v1_status: Callable[[], None] = lambda: None

    def start(self, stop: threading.Event) -> None:
        """Start every worker thread, in this order; `stop` ends them all."""
        if self.elector is not None:
            self.elector.start(stop)
        self.lifecycle.start(stop)
        # The shared bound-pod watch: once the lifecycle listens, before the first batch reads it.
        self.bound.start(
            self.kube, stop, tick=self.heartbeats.register("informer-pods", DEADLINES["informer-pods"])
        )
        self.provisioning.start(stop)
        if self.observer is not None:
            self.observer.start(stop)
        tick = self.heartbeats.register("v1-status", V1_STATUS_DEADLINE)

        def status_pass() -> float:
            self.v1_status()
            return v1status.PERIOD_SECONDS

        threading.Thread(
            target=run_forever,
            args=(status_pass, stop),
            kwargs={"doing": "writing nodepool and ec2nodeclass status", "tick": tick},
            name="v1-status",
            daemon=True,
        ).start()


#: The status pass runs every minute; a missed few is no reason to restart.
V1_STATUS_DEADLINE = 600.0


def build(settings: Settings, heartbeats: Heartbeats) -> Controller:
    """kube client -> cloud provider -> state -> leader elector -> bound-pod index -> provisioning
    -> lifecycle; nothing runs yet."""
    kube = kube_client.load(settings)
    version = None if settings.aws.kubernetes_version else ServerVersion(partial(server_version, kube))
    cloud = decorate(AWSCloudProvider(settings=settings, kubernetes_version=version))
    state = ClusterState()
    elector = _elector(kube, settings) if settings.leader_election.enabled else None
    is_leader = elector.is_leader if elector is not None else _always
    # One watch of every bound pod for provisioning, the node worker and consolidation.
    bound = BoundPods()
    provisioning = ProvisioningController(
        settings=settings, kube=kube, cloud=cloud, state=state, bound=bound, is_leader=is_leader
    )
    ctx = Context(
        settings=settings,
        kube=kube,
        cloud=cloud,
        state=state,
        provisioning=provisioning,
        recorder=Recorder(kube),
        is_leader=is_leader,
        unavailable=provisioning.mark_unavailable,
    )
    sqs = make_clients(settings.aws).sqs if settings.aws.interruption_queue else None
    lifecycle = LifecycleController(ctx, bound=bound, heartbeats=heartbeats, sqs=sqs)
    observer = Observer(
        settings=settings, kube=kube, cloud=cloud, provisioning=provisioning, is_leader=is_leader
    )

    def v1_status() -> None:
        if is_leader():
            v1status.refresh(kube, cloud.node_class_status, settings)

    return Controller(
        kube, state, elector, bound, provisioning, lifecycle, heartbeats, observer, v1_status=v1_status
    )


def start(settings: Settings, stop: threading.Event, heartbeats: Heartbeats | None = None) -> Controller:
    """Build the controller and start its threads; what the extender app needs is on it."""
    controller = build(settings, heartbeats or Heartbeats())
    controller.start(stop)
    return controller


def _always() -> bool:
    return True


def _elector(kube: client.ApiClient, settings: Settings) -> LeaderElector:
    on_started, on_stopped = _leader_label(kube, settings)
    return LeaderElector(
        kube=kube, settings=settings.leader_election, on_started=on_started, on_stopped=on_stopped
    )


def _port(bind: str) -> str:
    return bind.rsplit(":", 1)[-1]


#: Request threads of the extender. A connection a slow client stalls holds one for up to
#: request_read_seconds; with this many, 64 stalled connections still leave kube-scheduler and the
#: kubelet's probes threads to spare (tests/process/http/test_slow_clients.py measures it).
THREADS = 128


def separate_metrics(settings: Settings) -> bool:
    ext = settings.extender
    return bool(ext.metrics_bind) and ext.metrics_bind != ext.bind


def wsgi_app(settings: Settings, extender: Flask) -> Any:
    """The extender app, with the metrics port routed to an app that serves only /metrics."""
    if not separate_metrics(settings):
        return extender
    return by_port(extender, {_port(settings.extender.metrics_bind): create_metrics_app(settings)})


def gunicorn_options(settings: Settings, *, threads: int = THREADS) -> dict[str, Any]:
    ext = settings.extender
    metrics_binds = (ext.metrics_bind,) if separate_metrics(settings) else ()
    options = limits.options(
        bind=[ext.bind, *metrics_binds],
        threads=threads,
        request_read_seconds=ext.request_read_seconds,
        certfile=ext.tls_cert_file,
        keyfile=ext.tls_key_file,
        # Prometheus and the kubelet's probes of the metrics port need no certificate.
        plain_binds=metrics_binds,
        name="karpy-controller",
    )
    # One worker: the extender guard must read the memory the provisioning threads write. gthread's
    # main loop beats for the worker: no silent-worker kill during a long batch.
    options.update(workers=1, timeout=0, loglevel=settings.log_level.lower())
    return options


def run(settings: Settings, *, threads: int = THREADS) -> None:
    """Serve until SIGTERM/SIGINT; gunicorn's master forwards it to the one worker."""
    stop = threading.Event()

    def factory() -> Any:
        controller = start(settings, stop)
        app = create_app(
            settings,
            controller.state,
            controller.provisioning.enqueue,
            heartbeats=controller.heartbeats,
            readiness=controller.provisioning.warmup.readiness,
        )
        return wsgi_app(settings, app)

    def worker_exit(_server: Any, _worker: Any) -> None:
        stop.set()

    serve(factory, {**gunicorn_options(settings, threads=threads), "worker_exit": worker_exit})
