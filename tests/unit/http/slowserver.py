"""Serve the extender app (empty ClusterState) under the controller's real gunicorn options.

`python -m tests.unit.http.slowserver PORT METRICS_PORT [stock]`: "stock" serves it the way karpy did
before issue 13 (plain gthread, 8 threads, one app on both ports) for a before/after measurement.
"""

from __future__ import annotations

import sys

from extender.http.app import create_app
from extender.main import gunicorn_options, wsgi_app
from extender.serve import serve
from extender.settings import Settings
from extender.state import ClusterState


def main(port: str, metrics_port: str, mode: str = "bounded") -> None:
    settings = Settings()
    settings.extender.bind = f"127.0.0.1:{port}"
    settings.extender.metrics_bind = f"127.0.0.1:{metrics_port}"
    settings.log_level = "WARNING"
    state = ClusterState()
    state.set_ready()
    app = create_app(settings, state, lambda _pods: None)
    if mode == "stock":
        options = {
            "bind": [settings.extender.bind, settings.extender.metrics_bind],
            "workers": 1,
            "worker_class": "gthread",
            "threads": 8,
            "timeout": 0,
            "control_socket_disable": True,
        }
        serve(lambda: app, options)
    else:
        serve(lambda: wsgi_app(settings, app), gunicorn_options(settings))


if __name__ == "__main__":
    main(*sys.argv[1:])
