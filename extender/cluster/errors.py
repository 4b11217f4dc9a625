"""Kubernetes API errors grouped by what karpy does about them (beside cloud/aws/errors.py).

Adapters in extender.cluster catch the client's ApiException once and re-raise through
`translated("patching node n1")`, so code above the cluster layer matches on NotFound, Conflict,
AlreadyExists, Throttled or Unavailable and never reads HTTP status codes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError


class ClusterError(Exception):
    """An API-server call failed; `status` is the HTTP status (0 when the connection failed)."""

    def __init__(self, message: str, *, status: int = 0, reason: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason


class NotFound(ClusterError):
    """404: the object is gone; deleting or un-cordoning it again is a no-op."""


class Conflict(ClusterError):
    """409 with a stale resourceVersion (or a pod already bound): read again, then decide."""


class AlreadyExists(ClusterError):
    """409 AlreadyExists on create."""


class Invalid(ClusterError):
    """422: the request is wrong for the object's current state (e.g. a JSON-patch test failed)."""


class Throttled(ClusterError):
    """429: API priority and fairness or a PDB said not now; retry with backoff."""


class Unavailable(ClusterError):
    """5xx or no connection: the API server is restarting or overloaded; retry with backoff."""


def _status_reason(err: ApiException) -> tuple[str, str]:
    try:
        body = json.loads(err.body or "{}")
    except (TypeError, ValueError):
        return "", str(err.reason or "")
    if not isinstance(body, dict):
        return "", str(err.reason or "")
    return str(body.get("reason") or ""), str(body.get("message") or err.reason or "")


def translate(err: ApiException, doing: str) -> ClusterError:
    """The ClusterError for `err`, its message naming the step that failed."""
    status = int(err.status or 0)
    reason, message = _status_reason(err)
    text = f"{doing}: {status} {message}".rstrip()
    if status == 404:
        return NotFound(text, status=status, reason=reason)
    if status == 409:
        kind = AlreadyExists if reason == "AlreadyExists" else Conflict
        return kind(text, status=status, reason=reason)
    if status == 422:
        return Invalid(text, status=status, reason=reason)
    if status == 429:
        return Throttled(text, status=status, reason=reason)
    if status == 0 or status >= 500:
        return Unavailable(text, status=status, reason=reason)
    return ClusterError(text, status=status, reason=reason)


def is_transient(err: BaseException) -> bool:
    """Worth retrying as is: throttling, a server error, or a dropped connection."""
    if isinstance(err, ClusterError):
        return isinstance(err, Throttled | Unavailable)
    if isinstance(err, ApiException):
        return isinstance(translate(err, ""), Throttled | Unavailable)
    return isinstance(err, ConnectionError | TimeoutError)


@contextmanager
def translated(doing: str) -> Iterator[None]:
    """Run an API call; an ApiException leaves as the matching ClusterError naming `doing`, a
    connection that failed below HTTP (urllib3 gave up) as Unavailable with status 0."""
    try:
        yield
    except ApiException as err:
        raise translate(err, doing) from err
    except HTTPError as err:
        raise Unavailable(f"{doing}: {err}") from err
