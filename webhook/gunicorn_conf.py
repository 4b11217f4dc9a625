"""gunicorn settings for the webhook (used by `karpy webhook`, which runs gunicorn in-process).

The shared bounds (read deadline, header limits, TLS handshake timeout) are extender/http/limits.py's.
"""

from __future__ import annotations

from typing import Any

from extender.http import limits

#: The API server sends an AdmissionReview in milliseconds; its own webhook timeout is <= 30s.
REQUEST_READ_SECONDS = 10.0


def options(
    *, bind: str, certfile: str = "", keyfile: str = "", workers: int = 1, threads: int = 128
) -> dict[str, Any]:
    opts = limits.options(
        bind=[bind],
        # Threads, not processes: admission is short CPU work, and the Provisioner cache is per process.
        threads=threads,
        workers=workers,
        request_read_seconds=REQUEST_READ_SECONDS,
        certfile=certfile,
        keyfile=keyfile,
        name="karpy-webhook",
    )
    # The API server calls with ?timeout=<=30s and keeps connections alive between calls.
    opts.update(timeout=30, loglevel="info")
    return opts
