"""The scheduler extender: Flask app with /filter, /prioritize, /healthz, /readyz, /metrics.

/readyz answers 503 with the warm-up steps still running (JSON `waiting`) until the controller has
warmed up (provisioning/warmup.py), then 200 "ok"; /healthz is about the worker loops only.

Wire format is kube-scheduler's ExtenderArgs / ExtenderFilterResult / HostPriorityList (Go field
names, no json tags, so keys are capitalised). Served by gunicorn in the controller process so
the guard reads the same ClusterState the workers write. `create_metrics_app` is what the metrics
port serves (only /metrics); `by_port` routes each listener to its app. Every answer is JSON, bodies
are capped and read before the app runs (extender/http/limits.py).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from flask import Flask, Response, request
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from extender.heartbeat import Heartbeats
from extender.http import guard
from extender.http.limits import Environ, StartResponse, WSGIApp, bound
from extender.provisioning import metrics
from extender.provisioning.warmup import Readiness
from extender.settings import Settings
from extender.state import ClusterState

log = logging.getLogger("karpy.extender")


def _body() -> Any:
    try:
        return json.loads(request.get_data(cache=False))
    except (ValueError, RecursionError):
        return None


def _bad_request(why: str) -> Response:
    metrics.EXTENDER_ERRORS.labels(verb="filter", reason="bad_request").inc()
    # A 200 with Error: kube-scheduler (ignorable) skips us instead of failing the pod.
    return _json({"NodeNames": None, "Nodes": None, "FailedNodes": {}, "Error": f"karpy: bad request, {why}"})


def _json(value: Any) -> Response:
    # Plain json.dumps: Flask's provider sorts keys, which costs milliseconds at 5,000 nodes.
    return Response(json.dumps(value, separators=(",", ":")), mimetype="application/json")


def _limited(app: Flask, settings: Settings) -> Flask:
    return bound(app, max_body_bytes=settings.extender.max_body_bytes)


def create_app(
    settings: Settings,
    state: ClusterState,
    enqueue: Callable[[Sequence[dict[str, Any]]], None],
    *,
    heartbeats: Heartbeats | None = None,
    readiness: Readiness | None = None,
) -> Flask:
    """`heartbeats`: the worker loops /healthz watches (extender/heartbeat.py); none by default.
    `readiness`: the warm-up steps /readyz waits for (provisioning/warmup.py); without it, /readyz
    waits for the pending-pod watch alone."""
    app = _limited(Flask("karpy-extender"), settings)
    app.config["KARPY_SETTINGS"] = settings
    app.after_request(_count_failure)

    @app.post("/filter")
    def filter_() -> Response:
        started = time.perf_counter()
        args = _body()
        if not isinstance(args, dict):
            return _bad_request("body is not a JSON object")
        pod = args.get("Pod") or {}
        try:
            names = guard.node_names(args)
        except guard.BadArgs as err:
            return _bad_request(str(err))
        if not isinstance(pod, dict):
            return _bad_request("Pod is not an object")
        if not isinstance(pod.get("metadata") or {}, dict):
            return _bad_request("Pod.metadata is not an object")
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
        return _json(result.wire(guard.node_items(args)))

    @app.post("/prioritize")
    def prioritize() -> Response:
        started = time.perf_counter()
        args = _body()
        try:
            names = guard.node_names(args if isinstance(args, dict) else {})
        except guard.BadArgs:
            names = []  # prioritize errors are ignored by kube-scheduler; no scores is the same
        pod = args.get("Pod") if isinstance(args, dict) else None
        # kube-scheduler adds an extender's score only to the hosts it lists, so equal scores for
        # all (the common case) are said with an empty list: no 1,000-entry answer to encode.
        scores = guard.prioritize(state, names, pod) if guard.has_preference(state, names, pod) else []
        metrics.EXTENDER.labels(verb="prioritize").observe(time.perf_counter() - started)
        return _json(scores)

    @app.get("/healthz")
    def healthz() -> tuple[Response | str, int]:
        late = heartbeats.late() if heartbeats is not None else []
        if late:
            return _json({"status": "unhealthy", "late": [str(x) for x in late]}), 503
        return "ok", 200

    @app.get("/readyz")
    def readyz() -> tuple[Response | str, int]:
        waiting = readiness.waiting() if readiness is not None else ([] if state.ready else ["informers"])
        if waiting:
            return _json({"status": "warming up", "waiting": waiting}), 503
        return "ok", 200

    @app.get("/metrics")
    def metrics_() -> Response:
        return _metrics()

    return app


def _count_failure(response: Response) -> Response:
    """A scheduling request that failed (a 5xx, the JSON error answer of an exception): the
    extender-errors alert reads it."""
    if response.status_code >= 500 and request.path in ("/filter", "/prioritize"):
        metrics.EXTENDER_ERRORS.labels(verb=request.path.strip("/"), reason="exception").inc()
    return response


def _metrics() -> Response:
    return Response(generate_latest(), mimetype=CONTENT_TYPE_LATEST)


def create_metrics_app(settings: Settings) -> Flask:
    """What the metrics port serves: /metrics and nothing else (JSON 404 for the rest)."""
    app = _limited(Flask("karpy-metrics"), settings)
    app.get("/metrics")(_metrics)
    return app


def by_port(default: WSGIApp, apps: Mapping[str, WSGIApp]) -> WSGIApp:
    """One gunicorn worker, several listeners: the app for the port the request arrived on
    (gunicorn's SERVER_PORT is the listening socket's port, not the Host header's)."""

    def dispatch(environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        return apps.get(str(environ.get("SERVER_PORT", "")), default)(environ, start_response)

    return dispatch
