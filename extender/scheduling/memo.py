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
from typing import Any, Generic, TypeVar, cast

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

_serials = itertools.count(1)


#: A number no other object of this process gets (a dataclass `default_factory`; the counter's own
#: method, so making an object adds no Python call).
serial: Callable[[], int] = _serials.__next__


#: What `Memo.found.get(key, MISSING)` gives for a key not asked yet (a result may be None).
MISSING: Any = object()


class Memo(Generic[K, V]):
    """Results by key; with a `limit`, emptied when it holds that many (the calls are pure, so
    forgetting costs only time). Results may be None."""

    __slots__ = ("found", "limit")

    def __init__(self, limit: int | None = None) -> None:
        #: The results so far, only read outside: the innermost loop reads them with
        #: `.get(key, MISSING)`, saving a call per hit, and asks `get` on a miss.
        self.found: dict[K, V] = {}
        self.limit = limit

    def get(self, key: K, compute: Callable[..., V], *args: object) -> V:
        """The result for `key`, `compute(*args)` the first time (arguments, not a closure: the
        packer asks in its innermost loop)."""
        found = self.found.get(key, MISSING)
        if found is MISSING:
            if self.limit is not None and len(self.found) >= self.limit:
                self.found.clear()
            found = self.found[key] = compute(*args)
        return cast(V, found)

    def __len__(self) -> int:
        return len(self.found)
