"""List-then-watch for any list endpoint, as API JSON, with resourceVersion bookkeeping.

`kubernetes.watch.Watch` retries a 410 once on its own and, with `deserialize=False`, fails on
ERROR events; karpy needs the 410 itself (to re-list), so the stream is read here directly.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

from extender.cluster.client import call_json
from extender.cluster.errors import ClusterError, translate, translated

GONE = 410


class Gone(ClusterError):
    """The resourceVersion is too old (410): the caller must re-list."""

    def __init__(self, message: str) -> None:
        super().__init__(message, status=GONE, reason="Expired")


PAGE = 500


def stream_objects(func: Callable[..., Any], **kwargs: Any) -> tuple[Iterator[dict[str, Any]], str]:
    """Every item (following `continue`) and the list's resourceVersion to watch from (every page
    of a paginated list is of the first page's resourceVersion). Only the first page is read now;
    the others as the items are consumed, so a large listing never exists as JSON all at once."""
    first = call_json(func, limit=PAGE, _continue=None, **kwargs)

    def items() -> Iterator[dict[str, Any]]:
        page = first
        while True:
            yield from page.get("items") or []
            token = (page.get("metadata") or {}).get("continue") or ""
            if not token:
                return
            page = call_json(func, limit=PAGE, _continue=token, **kwargs)

    return items(), (first.get("metadata") or {}).get("resourceVersion", "")


def list_objects(func: Callable[..., Any], **kwargs: Any) -> tuple[list[dict[str, Any]], str]:
    """Every item (following `continue`) and the list's resourceVersion to watch from."""
    items, version = stream_objects(func, **kwargs)
    return list(items), version


def watch_objects(
    func: Callable[..., Any], resource_version: str, *, timeout_seconds: int = 60, **kwargs: Any
) -> Iterator[tuple[str, dict[str, Any]]]:
    """(type, object) events from resource_version until the server closes the watch.

    BOOKMARK events are passed on (their object carries only the new resourceVersion); a 410 in
    the stream or as the HTTP answer raises Gone, any other failure a ClusterError.
    """
    doing = f"watching {getattr(func, '__name__', 'objects')}"
    try:
        with translated(doing):
            response = func(
                watch=True,
                resource_version=resource_version,
                allow_watch_bookmarks=True,
                timeout_seconds=timeout_seconds,
                _preload_content=False,
                **kwargs,
            )
    except ClusterError as err:
        if err.status == GONE:
            raise Gone(str(err)) from err
        raise
    try:
        for line in iter_resp_lines(response):
            if not line or line.isspace():
                continue
            event = json.loads(line)
            obj = event.get("object") or {}
            if event.get("type") == "ERROR":
                if obj.get("code") == GONE:
                    raise Gone(obj.get("message", "resource version too old"))
                raise translate(
                    ApiException(status=obj.get("code"), reason=f"{obj.get('reason')}: {obj.get('message')}"),
                    doing,
                )
            yield event["type"], obj
    finally:
        response.close()
        response.release_conn()
