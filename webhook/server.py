"""Run a WSGI app factory under gunicorn in-process (gunicorn.app.base.BaseApplication)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gunicorn.app.base import BaseApplication


class _Server(BaseApplication):  # type: ignore[misc]
    def __init__(self, factory: Callable[[], Any], options: Mapping[str, Any]) -> None:
        self._factory = factory
        self._options = dict(options)
        super().__init__()

    def load_config(self) -> None:
        for key, value in self._options.items():
            if key in self.cfg.settings and value is not None:
                self.cfg.set(key, value)

    def load(self) -> Any:
        # Called in each worker, so per-process state (locks, caches, metrics) is created after the fork.
        return self._factory()


def serve(factory: Callable[[], Any], options: Mapping[str, Any]) -> None:
    """Blocks until gunicorn exits (SIGTERM/SIGINT)."""
    _Server(factory, options).run()
