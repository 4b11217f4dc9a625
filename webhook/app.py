"""`create_app(config)`: the admission webhook as a Flask app (run under gunicorn by `karpy webhook`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from flask import Flask

from extender.api.provisioner import Provisioner
from extender.http.limits import bound
from webhook import health, routes
from webhook.config import WebhookConfig
from webhook.metrics import WebhookMetrics
from webhook.pool_cache import ProvisionerSource, kube_fetch
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
    # The issue that introduced the cap asked for 400 on oversized AdmissionReviews.
    bound(app, max_body_bytes=config.max_body_bytes, too_large_status=400)
    return app
