"""The node index (extender/cluster/nodeindex.py): every Node parsed once per event, karpy's own
creations counted before their events arrive."""

from __future__ import annotations

from functools import partial
from typing import Any

from extender.cluster.nodeindex import NodeIndex
from tests import builders

#: A node not karpy's of 4 CPU, 110 pods, at resourceVersion 1; keywords as tests.builders.node_manifest.
node = partial(
    builders.node_manifest,
    provisioner=None,
    instance=None,
    ready=None,
    resource_version="1",
    room={"cpu": "4", "pods": "110"},
)


def names(index: NodeIndex) -> dict[str, float]:
    return {n.name: n.allocatable.cpu for n in index.current(lambda: [])}


def synced(*nodes: dict[str, Any]) -> NodeIndex:
    index = NodeIndex()
    index.replace(iter(nodes), "10")
    index._watching = True  # as if its watch had started: reads no longer list
    return index


def test_events_add_modify_and_delete_nodes() -> None:
    index = synced(node("a"), node("b"))
    index.apply("ADDED", node("c", resource_version="11"))
    index.apply("MODIFIED", node("a", room={"cpu": "8", "pods": "110"}, resource_version="12"))
    index.apply("DELETED", node("b", resource_version="13"))
    index.apply("BOOKMARK", {"metadata": {"resourceVersion": "14"}})
    assert names(index) == {"a": 8, "c": 4} and index.resource_version == "14"


def test_a_node_karpy_cannot_parse_is_left_out_and_the_watch_goes_on() -> None:
    index = synced(node("a"), node("bad", room={"cpu": "lots", "pods": "110"}))
    index.apply("MODIFIED", node("a", room={"cpu": "nope", "pods": "110"}, resource_version="11"))
    index.apply("ADDED", node("c", resource_version="12"))
    assert names(index) == {"c": 4}


def test_a_created_node_counts_until_its_event_arrives_and_never_overrides_it() -> None:
    index = synced(node("a"))
    index.assume(node("new", room={"cpu": "2", "pods": "110"}))
    assert names(index) == {"a": 4, "new": 2}
    index.apply("ADDED", node("seen", room={"cpu": "16", "pods": "110"}, resource_version="11"))
    index.assume(node("seen", room={"cpu": "1", "pods": "110"}))
    assert names(index)["seen"] == 16


def test_without_a_watch_every_read_lists_afresh() -> None:
    index = NodeIndex()
    assert [n.name for n in index.current(lambda: [node("a")])] == ["a"]
    assert [n.name for n in index.current(lambda: [node("b")])] == ["b"]
