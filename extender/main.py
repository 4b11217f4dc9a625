"""`karpy controller` wiring: settings -> kube client -> cloud -> state -> provisioning -> lifecycle,
with gunicorn serving the extender app in the same process so ClusterState is shared.

Everything is built in gunicorn's worker (after the fork), where the app is loaded; the worker's
exit sets `stop`, which ends the watch, batch, lifecycle and leader-election threads.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from typing import Any

from flask import Flask
from kubernetes import client

from extender.cloud.aws.provider import AWSCloudProvider
from extender.cloud.metrics import decorate
from extender.cluster import client as kube_client
from extender.cluster.leaderlabel import LeaderLabel
from extender.http.app import create_app
from extender.provisioning.controller import ProvisioningController
from extender.serve import serve
from extender.settings import Settings
from extender.state import ClusterState

log = logging.getLogger("karpy.controller")


def _server_version(kube: client.ApiClient) -> Callable[[], str]:
    def version() -> str:
        info = client.VersionApi(kube).get_code()
        return f"{info.major}.{re.sub(r'[^0-9]', '', info.minor)}"

    return version


def _leader_label(kube: client.ApiClient, settings: Settings) -> dict[str, Callable[[], None]]:
    """Elector callbacks that keep the leader's pod the extender Service's only endpoint."""
    s = settings.leader_election
    if not s.pod_name:
        return {}
    label = LeaderLabel(kube, s.namespace, s.pod_name)
    label.set(False)  # a restarted container keeps its pod's labels

    def started() -> None:
        label.set(True)

    def stopped() -> None:
        label.set(False)

    return {"on_started": started, "on_stopped": stopped}


def start(settings: Settings, stop: threading.Event) -> tuple[ClusterState, ProvisioningController]:
    """Build and start every worker thread; returns what the extender app needs."""
    kube = kube_client.load(settings)
    version = None if settings.aws.kubernetes_version else _server_version(kube)
    cloud = decorate(AWSCloudProvider(settings=settings, kubernetes_version=version))
    state = ClusterState()
    is_leader: Callable[[], bool] = lambda: True  # noqa: E731 - replaced when leader election runs
    if settings.leader_election.enabled:
        from extender.lifecycle.leader import LeaderElector

        elector = LeaderElector(kube=kube, settings=settings.leader_election, **_leader_label(kube, settings))
        elector.start(stop)
        is_leader = elector.is_leader
    provisioning = ProvisioningController(
        settings=settings, kube=kube, cloud=cloud, state=state, is_leader=is_leader
    )
    provisioning.start(stop)
    from extender.lifecycle.controller import start_lifecycle

    start_lifecycle(
        settings=settings,
        kube=kube,
        cloud=cloud,
        state=state,
        provisioning=provisioning,
        is_leader=is_leader,
        stop=stop,
    )
    return state, provisioning


def run(settings: Settings, *, threads: int = 8) -> None:
    """Serve until SIGTERM/SIGINT; gunicorn's master forwards it to the one worker."""
    stop = threading.Event()

    def factory() -> Flask:
        state, provisioning = start(settings, stop)
        return create_app(settings, state, provisioning.enqueue)

    def worker_exit(_server: Any, _worker: Any) -> None:
        stop.set()

    binds = [settings.extender.bind]
    if settings.extender.metrics_bind and settings.extender.metrics_bind != settings.extender.bind:
        binds.append(settings.extender.metrics_bind)
    serve(
        factory,
        {
            "bind": binds,
            # One worker: the extender guard must read the memory the provisioning threads write.
            "workers": 1,
            "worker_class": "gthread",
            "threads": threads,
            "worker_exit": worker_exit,
            "graceful_timeout": 10,
            "timeout": 0,
            "accesslog": None,
            # gunicorn's control socket defaults to one path per user: a second controller (or the
            # webhook) on the same host would take it over.
            "control_socket_disable": True,
            "loglevel": settings.log_level.lower(),
        },
    )
