"""List-then-watch loop delivering API JSON to a callback, re-listing on 410 Gone or errors.

Built on extender.cluster.watch (list_objects / watch_objects); the lifecycle runs two (karpy
Nodes, bound Pods), each in its own thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from extender.cluster.watch import Gone, list_objects, watch_objects

log = logging.getLogger("karpy.lifecycle.informer")

Handler = Callable[[str, Mapping[str, Any]], None]


def run_informer(
    list_fn: Callable[..., Any], handler: Handler, stop: threading.Event, *, name: str, **selectors: Any
) -> None:
    """`handler("SYNC", obj)` for each listed object, then `handler(type, obj)` per watch event."""
    while not stop.is_set():
        try:
            items, version = list_objects(list_fn, **selectors)
            for obj in items:
                handler("SYNC", obj)
            while not stop.is_set():
                for kind, obj in watch_objects(list_fn, version, timeout_seconds=30, **selectors):
                    version = (obj.get("metadata") or {}).get("resourceVersion") or version
                    if kind != "BOOKMARK":
                        handler(kind, obj)
                    if stop.is_set():
                        return
        except Gone:
            continue
        except Exception as err:  # connection reset, apiserver restart: relist after a pause
            log.warning("Watching %s failed, %s", name, err)
            stop.wait(1.0)


def start_informer(
    list_fn: Callable[..., Any], handler: Handler, stop: threading.Event, *, name: str, **selectors: Any
) -> threading.Thread:
    thread = threading.Thread(
        target=run_informer,
        args=(list_fn, handler, stop),
        kwargs={"name": name, **selectors},
        name=f"informer-{name}",
        daemon=True,
    )
    thread.start()
    return thread
