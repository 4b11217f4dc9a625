"""The scheduler extender: Flask app with /filter, /prioritize, /healthz, /readyz, /metrics.

Wire format is kube-scheduler's ExtenderArgs / ExtenderFilterResult / HostPriorityList (Go field
names, no json tags, so keys are capitalised). Served by gunicorn in the controller process so
the guard reads the same ClusterState the workers write.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from flask import Flask, Response, request
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from extender.http import guard
from extender.provisioning import metrics
from extender.settings import Settings
from extender.state import ClusterState

log = logging.getLogger("karpy.extender")


def _body() -> Any:
    try:
        return json.loads(request.get_data(cache=False))
    except ValueError:
        return None


def _json(value: Any) -> Response:
    # Plain json.dumps: Flask's provider sorts keys, which costs milliseconds at 5,000 nodes.
    return Response(json.dumps(value, separators=(",", ":")), mimetype="application/json")


def create_app(
    settings: Settings, state: ClusterState, enqueue: Callable[[Sequence[dict[str, Any]]], None]
) -> Flask:
    app = Flask("karpy-extender")
    app.config["KARPY_SETTINGS"] = settings

    @app.post("/filter")
    def filter_() -> Response:
        started = time.perf_counter()
        args = _body()
        if not isinstance(args, dict):
            # A 200 with Error: kube-scheduler (ignorable) skips us instead of failing the pod.
            return _json({"NodeNames": None, "Nodes": None, "FailedNodes": {}, "Error": "karpy: bad request"})
        pod = args.get("Pod") or {}
        names = guard.node_names(args)
        result = guard.filter_nodes(state, pod, names)
        if result.removal:
            metrics.EXTENDER_GUARDED.labels(reason="removal").inc(result.removal)
        if result.reserved:
            metrics.EXTENDER_GUARDED.labels(reason="reserved").inc(result.reserved)
        if result.claimed:
            metrics.EXTENDER_GUARDED.labels(reason="claimed").inc(len(names))
        if guard.fast_path(result, names, pod, enqueue):
            metrics.FAST_PATH.inc()
        metrics.EXTENDER.labels(verb="filter").observe(time.perf_counter() - started)
        return _json(result.wire())

    @app.post("/prioritize")
    def prioritize() -> Response:
        started = time.perf_counter()
        args = _body() or {}
        scores = guard.prioritize(state, guard.node_names(args))
        metrics.EXTENDER.labels(verb="prioritize").observe(time.perf_counter() - started)
        return _json(scores)

    @app.get("/healthz")
    def healthz() -> tuple[str, int]:
        return "ok", 200

    @app.get("/readyz")
    def readyz() -> tuple[str, int]:
        return ("ok", 200) if state.ready else ("pod watch not synced", 503)

    @app.get("/metrics")
    def metrics_() -> Response:
        return Response(generate_latest(), mimetype=CONTENT_TYPE_LATEST)

    return app
