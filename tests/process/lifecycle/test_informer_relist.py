"""An object deleted while an informer's watch was down reaches the handler as DELETED after the
re-list (extender/cluster/informer.py), as client-go's informers deliver DeletedFinalStateUnknown.

Found in the chaos run (issue 13): a node's deletion landed while the node watch was failing; the
re-list no longer had it, nobody told the node worker, and its cache kept the node as "deleting"
for good. That stale node used up the Provisioner's 10 % disruption budget, and the five empty
nodes left after the scale to 0 waited for a slot forever.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any
from unittest import mock

from kubernetes.client.exceptions import ApiException

from extender.cluster import informer
from extender.lifecycle.context import Context
from extender.lifecycle.nodes import NodeWorker
from extender.settings import Settings
from tests.builders import node_manifest
from tests.unit.lifecycle.builders import eventually


def _informer(monkeypatch: Any, lists: list[list[dict[str, Any]]], handler: Any) -> threading.Event:
    """An informer whose first watch fails at once and whose later watches stay quiet; the lists
    answer in order (the last one repeats)."""
    calls = {"list": 0, "watch": 0}

    def stream_objects(_fn: Any, **_selectors: Any) -> tuple[Iterator[dict[str, Any]], str]:
        calls["list"] += 1
        return iter(lists[min(calls["list"], len(lists)) - 1]), str(calls["list"])

    def watch_objects(_fn: Any, _version: str, **_kwargs: Any) -> Iterator[tuple[str, dict[str, Any]]]:
        calls["watch"] += 1
        if calls["watch"] == 1:
            raise ApiException(status=500, reason="Internal Server Error")
        stop.wait(0.05)
        return iter(())

    monkeypatch.setattr(informer, "stream_objects", stream_objects)
    monkeypatch.setattr(informer, "watch_objects", watch_objects)
    stop = threading.Event()
    informer.start_informer(lambda **_: None, handler, stop, name="nodes")
    return stop


def test_an_object_gone_from_the_relist_is_delivered_as_deleted(monkeypatch) -> None:
    seen: list[tuple[str, str]] = []
    pod = {"metadata": {"name": "p2", "namespace": "ns", "uid": "u2"}, "spec": {"nodeName": "n1"}}
    stop = _informer(
        monkeypatch,
        [
            [{"metadata": {"name": "p1", "namespace": "ns"}}, pod],
            [{"metadata": {"name": "p1", "namespace": "ns"}}],
        ],
        lambda kind, obj: seen.append((kind, obj)),
    )
    try:
        assert eventually(lambda: any(kind == "DELETED" for kind, _ in seen))
    finally:
        stop.set()
    deleted = [obj for kind, obj in seen if kind == "DELETED"]
    assert deleted == [
        {"metadata": {"name": "p2", "namespace": "ns", "uid": "u2"}, "spec": {"nodeName": "n1"}}
    ]


def test_a_node_deleted_during_a_failed_watch_stops_counting_against_the_budget(monkeypatch) -> None:
    ctx = Context(
        settings=Settings(),
        kube=object(),
        cloud=mock.Mock(),
        state=None,
        provisioning=None,
        recorder=mock.Mock(),
    )
    worker = NodeWorker(ctx, lambda _name: None)
    stop = _informer(
        monkeypatch,
        [[node_manifest("n1"), node_manifest("n2", deleting=True)], [node_manifest("n1")]],
        worker.on_node,
    )
    try:
        assert eventually(lambda: worker.census("default")["total"] == 1)
    finally:
        stop.set()
    assert worker.census("default") == {"total": 1, "deleting": set()}
