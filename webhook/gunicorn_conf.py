"""gunicorn settings for the webhook (used by `karpy webhook`, which runs gunicorn in-process)."""

from __future__ import annotations

import os
from typing import Any


def options(
    *, bind: str, certfile: str = "", keyfile: str = "", workers: int = 1, threads: int = 8
) -> dict[str, Any]:
    opts: dict[str, Any] = {
        "bind": [bind],
        # Threads, not processes: admission is short CPU work, and the Provisioner cache is per process.
        "worker_class": "gthread",
        "workers": workers,
        "threads": threads,
        # The API server calls with ?timeout=<=30s and keeps connections alive between calls.
        "timeout": 30,
        "graceful_timeout": 10,
        "keepalive": 30,
        "accesslog": None,
        "errorlog": "-",
        "loglevel": "info",
        "proc_name": "karpy-webhook",
    }
    if os.path.isdir("/dev/shm"):
        # Heartbeat files on tmpfs: a slow container disk must not get workers killed.
        opts["worker_tmp_dir"] = "/dev/shm"
    if certfile:
        opts["certfile"], opts["keyfile"] = certfile, keyfile
    return opts
