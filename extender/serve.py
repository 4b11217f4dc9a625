"""Run a WSGI app factory under gunicorn in-process (gunicorn.app.base.BaseApplication).

The one server start-up of both processes: `karpy controller` (extender/main.py) and
`karpy webhook` (extender/cli/webhook.py). It lives here, not in `webhook/`, so the controller
does not import the webhook package: only the CLI imports both.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from flask import Flask
from gunicorn.app.base import BaseApplication


class _Server(BaseApplication):
    def __init__(self, factory: Callable[[], Flask], options: Mapping[str, Any]) -> None:
        self._factory = factory
        self._options = dict(options)
        super().__init__()

    def load_config(self) -> None:
        for key, value in self._options.items():
            if key in self.cfg.settings and value is not None:
                self.cfg.set(key, value)

    def load(self) -> Flask:
        # Called in each worker, so per-process state (locks, caches, metrics) is created after the fork.
        return self._factory()


def serve(factory: Callable[[], Flask], options: Mapping[str, Any]) -> None:
    """Blocks until gunicorn exits (SIGTERM/SIGINT)."""
    _Server(factory, options).run()
