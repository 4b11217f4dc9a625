"""The bound-pod index (extender/cluster/boundpods.py): list once, follow the watch, re-list on 410,
compact what replicas share, and count karpy's own binds before their events arrive."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

from extender.api import labels as wk
from extender.api.pod import Pod
from extender.cluster import boundpods, informer
from extender.cluster.boundpods import BoundPods
from extender.cluster.watch import Gone, stream_objects
from tests import builders

#: A Running pod of app=web asking 1 CPU, bound to n1; keywords as tests.builders.pod_manifest.
bound_pod = partial(
    builders.pod_manifest,
    namespace="ns",
    resource_version="1",
    labels={"app": "web"},
    image=None,
    node_name="n1",
    cpu="1",
    phase="Running",
)


def synced(*pods: dict[str, Any]) -> BoundPods:
    index = BoundPods()
    index.replace(iter(pods), "10")
    return index


def test_watch_events_add_modify_and_delete_pods_per_node() -> None:
    index = synced(bound_pod("a"), bound_pod("b", cpu="500m"))
    index.apply("ADDED", bound_pod("c", node_name="n2", resource_version="11"))
    index.apply("MODIFIED", bound_pod("a", cpu="2", resource_version="12"))
    index.apply("DELETED", bound_pod("b", cpu="500m", resource_version="13"))
    bound = index.snapshot()
    assert bound.keys == {"ns/a", "ns/c"}
    assert [p.key for p in bound.on("n1").pods] == ["ns/a"] and bound.on("n1").requested.cpu == 2
    assert bound.on("n2").count == 1 and bound.on("n2").requested.cpu == 1
    assert bound.on("gone").count == 0
    assert index.resource_version == "13"


def test_a_pod_that_finishes_leaves_the_index() -> None:
    index = synced(bound_pod("job"), bound_pod("web"))
    index.apply("MODIFIED", bound_pod("job", phase="Succeeded", resource_version="11"))
    index.apply("MODIFIED", bound_pod("web", phase="Failed", resource_version="12"))
    assert index.snapshot().keys == frozenset() and index.snapshot().by_node == {}


def test_a_pod_karpy_cannot_parse_takes_a_slot_but_brings_no_requests() -> None:
    index = synced(bound_pod("ok"), bound_pod("bad", cpu="1x"))
    node = index.snapshot().on("n1")
    assert node.count == 2 and [p.key for p in node.pods] == ["ns/ok"] and node.requested.cpu == 1


def test_bookmarks_only_move_the_resource_version() -> None:
    index = synced(bound_pod("a"))
    index.apply("BOOKMARK", {"metadata": {"resourceVersion": "99"}})
    assert index.resource_version == "99" and index.snapshot().keys == {"ns/a"}


def test_replicas_share_labels_requests_and_rules_and_keep_only_read_annotations() -> None:
    a = bound_pod("a", annotations={wk.DO_NOT_EVICT_ANNOTATION: "true", "checksum/config": "x" * 100})
    b = bound_pod("b", annotations={"checksum/config": "y" * 100})
    first, second = synced(a, b).snapshot().on("n1").pods
    assert first.labels is second.labels and first.requests is second.requests
    assert first.tolerations is second.tolerations
    assert first.annotations == {wk.DO_NOT_EVICT_ANNOTATION: "true"} and second.annotations == {}
    assert first.uid == "" and first.node_name == "n1"


def test_interned_values_no_live_pod_holds_are_forgotten(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(boundpods, "INTERN_SLACK", 10)
    index = synced()
    # Job pods with labels of their own, each deleted again: their labels must not pile up.
    for i in range(200):
        index.apply("ADDED", bound_pod(f"job-{i}", labels={"job": f"j{i}"}))
        index.apply("DELETED", bound_pod(f"job-{i}", labels={"job": f"j{i}"}))
    index.apply("ADDED", bound_pod("web", labels={"app": "web"}))
    assert len(index._state.interner) < 4 * 1 + 10 + 20
    (web,) = index.snapshot().on("n1").pods
    assert web.labels == {"app": "web"}


def test_an_assumed_bind_counts_until_its_event_replaces_it() -> None:
    index = synced(bound_pod("a"))
    pending = Pod.from_manifest(
        {**bound_pod("new"), "spec": {"containers": bound_pod("new")["spec"]["containers"]}}
    )
    index.assume(pending, "n1")
    assert index.snapshot().on("n1").count == 2 and "ns/new" in index.snapshot().keys
    index.apply("ADDED", bound_pod("new", resource_version="11"))
    node = index.snapshot().on("n1")
    assert node.count == 2 and node.requested.cpu == 2


def test_listeners_see_listed_pods_and_every_event() -> None:
    index = BoundPods()
    seen: list[tuple[str, str]] = []
    index.subscribe(lambda kind, pod: seen.append((kind, pod.name)))
    index.replace(iter([bound_pod("a")]), "1")
    index.apply("DELETED", bound_pod("a", resource_version="2"))
    assert seen == [("SYNC", "a"), ("DELETED", "a")]


def test_a_relist_announces_pods_deleted_while_the_watch_was_down() -> None:
    # As the nodes informer does (client-go's DeletedFinalStateUnknown): the lifecycle's node worker
    # looks at a node again on a pod event, so a node emptied during a watch gap is not left to
    # the next resync.
    index = BoundPods()
    seen: list[tuple[str, str, str]] = []
    index.subscribe(lambda kind, pod: seen.append((kind, pod.name, pod.node_name)))
    index.replace(iter([bound_pod("a"), bound_pod("b", node_name="n2")]), "1")
    seen.clear()
    index.replace(iter([bound_pod("a", resource_version="3")]), "5")
    assert seen == [("SYNC", "a", "n1"), ("DELETED", "b", "n2")]


def test_without_a_watch_every_read_lists_afresh() -> None:
    index = BoundPods()
    listings = iter([[bound_pod("a")], [bound_pod("b")]])
    assert index.current(lambda: next(listings)).keys == {"ns/a"}
    assert index.current(lambda: next(listings)).keys == {"ns/b"}


def test_group_indexes_manifests_once() -> None:
    bound = boundpods.group(
        [
            bound_pod("a"),
            bound_pod("b", node_name="n2"),
            bound_pod("done", phase="Succeeded"),
            bound_pod("x", node_name=""),
        ]
    )
    assert bound.keys == {"ns/a", "ns/b"} and set(bound.by_node) == {"n1", "n2"}


def test_the_watch_relists_after_410_gone_and_drops_what_disappeared(monkeypatch: pytest.MonkeyPatch) -> None:
    """One list, events from its resourceVersion, 410 Gone, a fresh list that replaces everything."""
    listings = iter(
        [
            ([bound_pod("a"), bound_pod("b")], "10"),
            ([bound_pod("b"), bound_pod("c")], "20"),
            ([bound_pod("c")], "30"),
        ]
    )
    watched_from: list[str] = []
    stop = threading.Event()

    def fake_list(_fn: Any, **_selectors: Any) -> tuple[Iterator[dict[str, Any]], str]:
        items, version = next(listings)
        return iter(items), version

    def fake_watch(_fn: Any, version: str, **_kw: Any) -> Iterator[tuple[str, dict[str, Any]]]:
        watched_from.append(version)
        if version == "10":
            yield "ADDED", bound_pod("d", resource_version="11")
            raise Gone("too old resource version: 10")
        stop.set()
        return

    monkeypatch.setattr(informer, "stream_objects", fake_list)
    monkeypatch.setattr(informer, "watch_objects", fake_watch)
    index = BoundPods()
    index.run(None, stop)  # type: ignore[arg-type]
    # "a" and "d" left while the watch was gone; the re-list is the whole truth.
    assert index.snapshot().keys == {"ns/b", "ns/c"}
    assert watched_from == ["10", "20"] and index.relists == 2 and index.synced.is_set()


def test_a_listing_is_read_page_by_page_as_it_is_consumed() -> None:
    pages = {
        None: {"items": [bound_pod("a")], "metadata": {"continue": "p2", "resourceVersion": "7"}},
        "p2": {"items": [bound_pod("b")], "metadata": {"resourceVersion": "7"}},
    }
    asked: list[str | None] = []

    class Response:
        def __init__(self, body: dict[str, Any]) -> None:
            import json

            self.data = json.dumps(body).encode()

        def release_conn(self) -> None:
            pass

    def list_fn(**kw: Any) -> Response:
        asked.append(kw["_continue"])
        return Response(pages[kw["_continue"]])

    items, version = stream_objects(list_fn)
    assert version == "7" and asked == [None]
    assert [i["metadata"]["name"] for i in items] == ["a", "b"] and asked == [None, "p2"]
