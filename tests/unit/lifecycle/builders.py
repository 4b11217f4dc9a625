"""Waiting on the lifecycle's worker threads, and a Context with no API or cloud behind it; the pods
and nodes its tests use are in tests/builders.py."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from extender.lifecycle.context import Context, RemovalMarks
from extender.settings import Settings


def context(state: RemovalMarks | None) -> Context:
    """A lifecycle Context over `state` alone: no kube client, cloud or recorder (the test patches
    the nodepatch calls it expects)."""
    return Context(
        settings=Settings(),
        kube=None,
        cloud=None,  # type: ignore[arg-type]
        state=state,
        provisioning=None,
        recorder=None,  # type: ignore[arg-type]
    )


def eventually(predicate: Callable[[], Any], seconds: float = 30.0) -> bool:
    """Whether `predicate` turns true within `seconds` (for worker threads under test)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return bool(predicate())
