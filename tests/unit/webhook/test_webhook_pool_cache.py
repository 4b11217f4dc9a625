"""ProvisionerSource: TTL caching with an injected clock, short failure memory, invalid items skipped."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from tests.unit.webhook.reviews import provisioner_manifest
from webhook.pool_cache import ProvisionerSource


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Lister:
    def __init__(self) -> None:
        self.calls = 0
        self.fail = False
        self.items: list[Mapping[str, Any]] = [provisioner_manifest("a", weight=3)]

    def __call__(self) -> Sequence[Mapping[str, Any]]:
        self.calls += 1
        if self.fail:
            raise ConnectionRefusedError("apiserver down")
        return self.items


def source(lister: Lister, clock: Clock, results: list[str] | None = None) -> ProvisionerSource:
    sink = results if results is not None else []
    return ProvisionerSource(lister, ttl=5, failure_ttl=1, timer=clock, on_fetch=sink.append)


def test_list_is_cached_for_ttl_then_refreshed() -> None:
    lister, clock = Lister(), Clock()
    src = source(lister, clock)
    assert [p.name for p in src.get() or ()] == ["a"]
    clock.now = 4.9
    lister.items = [provisioner_manifest("b")]
    assert [p.name for p in src.get() or ()] == ["a"] and lister.calls == 1
    clock.now = 5.1
    assert [p.name for p in src.get() or ()] == ["b"] and lister.calls == 2


def test_failure_is_none_and_remembered_only_briefly() -> None:
    lister, clock, results = Lister(), Clock(), []
    lister.fail = True
    src = source(lister, clock, results)
    assert src.get() is None and src.get() is None
    assert lister.calls == 1
    clock.now = 1.5
    lister.fail = False
    assert [p.name for p in src.get() or ()] == ["a"]
    assert results == ["error", "ok"]


def test_invalid_provisioners_are_skipped() -> None:
    lister, clock = Lister(), Clock()
    lister.items = [provisioner_manifest("bad", ttlSecondsAfterEmpty=-1), provisioner_manifest("good")]
    assert [p.name for p in source(lister, clock).get() or ()] == ["good"]


def test_concurrent_misses_cause_one_list() -> None:
    lister, clock = Lister(), Clock()
    src = source(lister, clock)
    threads = [threading.Thread(target=src.get) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert lister.calls == 1
