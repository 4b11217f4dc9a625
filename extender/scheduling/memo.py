"""Memos of the packing core's pure calls, keyed by what the result depends on.

A key names objects by their `serial`: a number each object of a memoised kind (`Requirements`,
`Candidate`, `PodClass`, `ProvisionerView`) takes when it is made and no other object ever takes.
Unlike an `id()`, which a later object may reuse once the first is gone, a serial stays unique
without the memo keeping its objects alive; unlike a value hash, it costs nothing to compute (a
`Requirements` would hash every value set on every lookup) and keeps identity checks meaningful
(`Packer._merge` hands back the node's own requirements when a class adds nothing).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

_serials = itertools.count(1)


#: A number no other object of this process gets (a dataclass `default_factory`; the counter's own
#: method, so making an object adds no Python call).
serial: Callable[[], int] = _serials.__next__


_MISSING = object()


class Memo(Generic[K, V]):
    """Results by key; with a `limit`, emptied when it holds that many (the calls are pure, so
    forgetting costs only time). Results may be None."""

    __slots__ = ("_found", "limit")

    def __init__(self, limit: int | None = None) -> None:
        self._found: dict[K, V] = {}
        self.limit = limit

    def get(self, key: K, compute: Callable[..., V], *args: object) -> V:
        """The result for `key`, `compute(*args)` the first time (arguments, not a closure: the
        packer asks in its innermost loop)."""
        found = self._found.get(key, _MISSING)
        if found is _MISSING:
            if self.limit is not None and len(self._found) >= self.limit:
                self._found.clear()
            found = self._found[key] = compute(*args)
        return found  # type: ignore[return-value]

    def __len__(self) -> int:
        return len(self._found)
