"""/healthz, /readyz and /metrics."""

from __future__ import annotations

from flask import Blueprint, Response

from webhook.state import state

bp = Blueprint("health", __name__)


@bp.get("/healthz")
def healthz() -> Response:
    return Response("ok\n", mimetype="text/plain")


@bp.get("/readyz")
def readyz() -> Response:
    # Serving at all means the certificate loaded and the app was built; nothing else gates admission.
    return Response("ok\n", mimetype="text/plain")


@bp.get("/metrics")
def metrics() -> Response:
    body, content_type = state().metrics.render()
    return Response(body, content_type=content_type)
