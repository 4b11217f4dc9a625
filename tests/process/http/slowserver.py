"""Serve the extender app (empty ClusterState) under the controller's real gunicorn options.

`python -m tests.process.http.slowserver PORT METRICS_PORT [stock|bounded [CERT KEY]]`: "stock" serves it
the way karpy did before issue 13 (plain gthread, 8 threads, one app on both ports) for a
before/after measurement; CERT and KEY serve PORT over TLS (the metrics port stays plain).
`running` starts it in a subprocess for a test.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from extender.http.app import create_app
from extender.main import gunicorn_options, wsgi_app
from extender.serve import serve
from extender.settings import Settings
from extender.state import ClusterState

ROOT = Path(__file__).resolve().parents[3]


@contextmanager
def running(
    args: list[str], up: Callable[[], bool], start_seconds: float = 30, module: str = __name__
) -> Iterator[None]:
    """This server (or the one `module` runs) with `args` in a subprocess until the block ends;
    `up` says when it answers."""
    proc = subprocess.Popen(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + start_seconds
        while not up():
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise AssertionError(f"server did not start: {proc.communicate()[1][-2000:]!r}")
            time.sleep(0.2)
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def main(port: str, metrics_port: str, mode: str = "bounded", cert: str = "", key: str = "") -> None:
    settings = Settings()
    settings.extender.bind = f"127.0.0.1:{port}"
    settings.extender.metrics_bind = f"127.0.0.1:{metrics_port}"
    settings.extender.tls_cert_file, settings.extender.tls_key_file = cert, key
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
