"""Serve the extender app under the controller's real gunicorn options with a warm-up whose steps
finish when the test says so: `python -m tests.process.http.warmserver PORT GATE_DIR` marks a step
done once the file GATE_DIR/<step> exists. The steps are provisioning/warmup.py's own."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any

from extender.http.app import create_app
from extender.main import gunicorn_options, wsgi_app
from extender.provisioning.warmup import Readiness
from extender.serve import serve
from extender.settings import Settings
from extender.state import ClusterState


def _finish_when_told(readiness: Readiness, gate: Path) -> None:
    while not readiness.ready:
        for step in readiness.waiting():
            if (gate / step).exists():
                readiness.done(step)
        time.sleep(0.05)


def main(port: str, gate: str) -> None:
    settings = Settings()
    settings.extender.bind = f"127.0.0.1:{port}"
    settings.extender.metrics_bind = ""
    settings.log_level = "WARNING"

    def factory() -> Any:
        # In gunicorn's worker, after the fork, as extender/main.py builds the controller.
        state, readiness = ClusterState(), Readiness()
        state.set_ready()
        threading.Thread(target=_finish_when_told, args=(readiness, Path(gate)), daemon=True).start()
        return wsgi_app(settings, create_app(settings, state, lambda _pods: None, readiness=readiness))

    serve(factory, gunicorn_options(settings))


if __name__ == "__main__":
    main(*sys.argv[1:])
