"""Waiting on the lifecycle's worker threads; the pods and nodes its tests use are in tests/builders.py."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def eventually(predicate: Callable[[], Any], seconds: float = 30.0) -> bool:
    """Whether `predicate` turns true within `seconds` (for worker threads under test)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return bool(predicate())
