"""`create_app(config)`: the admission webhook as a Flask app (run under gunicorn by `karpy webhook`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from flask import Flask, Response, jsonify
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge

from extender.api.provisioner import Provisioner
from webhook import health, routes
from webhook.config import WebhookConfig
from webhook.metrics import WebhookMetrics
from webhook.provisioners import ProvisionerSource, kube_fetch
from webhook.state import EXTENSION, AppState


def _no_provisioners() -> None:
    return None


def create_app(
    config: WebhookConfig | None = None,
    *,
    provisioners: Callable[[], Sequence[Provisioner] | None] | None = None,
) -> Flask:
    """Build the app; `provisioners` replaces the API-server listing (tests, `karpy plan`-style tools)."""
    config = config or WebhookConfig()
    app = Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = config.max_body_bytes
    metrics = WebhookMetrics()
    if provisioners is None:
        provisioners = _no_provisioners
        if config.read_provisioners:
            provisioners = ProvisionerSource(
                kube_fetch(kubeconfig=config.kubeconfig, timeout=config.provisioner_list_timeout),
                ttl=config.provisioner_cache_seconds,
                failure_ttl=config.provisioner_failure_seconds,
                on_fetch=lambda result: metrics.provisioner_lists.labels(result).inc(),
            ).get
    app.extensions[EXTENSION] = AppState(config=config, metrics=metrics, provisioners=provisioners)
    app.register_blueprint(routes.bp)
    app.register_blueprint(health.bp)
    register_error_handlers(app, max_body_bytes=config.max_body_bytes)
    return app


def register_error_handlers(app: Flask, *, max_body_bytes: int) -> None:
    """Errors outside the handlers still answer JSON {code, message}, never an HTML page."""

    @app.errorhandler(RequestEntityTooLarge)
    def too_large(_err: RequestEntityTooLarge) -> tuple[Response, int]:
        # The issue asks for 400 on oversized bodies; the message says why.
        return jsonify(code=400, message=f"request body larger than {max_body_bytes} bytes"), 400

    @app.errorhandler(HTTPException)
    def http_error(err: HTTPException) -> tuple[Response, int]:
        code = err.code or 400
        return jsonify(code=code, message=err.description or err.name), code
