"""The node index (extender/cluster/nodeindex.py): every Node parsed once per event, karpy's own
creations counted before their events arrive."""

from __future__ import annotations

from typing import Any

from extender.cluster.nodeindex import NodeIndex
from tests import builders


def node(name: str, cpu: str = "4", version: str = "1", **labels: str) -> dict[str, Any]:
    room = {"cpu": cpu, "pods": "110"}
    return builders.node_manifest(
        name,
        provisioner=None,
        instance=None,
        ready=None,
        labels=labels,
        resource_version=version,
        allocatable=room,
        capacity=room,
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
    index.apply("ADDED", node("c", version="11"))
    index.apply("MODIFIED", node("a", cpu="8", version="12"))
    index.apply("DELETED", node("b", version="13"))
    index.apply("BOOKMARK", {"metadata": {"resourceVersion": "14"}})
    assert names(index) == {"a": 8, "c": 4} and index.resource_version == "14"


def test_a_node_karpy_cannot_parse_is_left_out_and_the_watch_goes_on() -> None:
    index = synced(node("a"), node("bad", cpu="lots"))
    index.apply("MODIFIED", node("a", cpu="nope", version="11"))
    index.apply("ADDED", node("c", version="12"))
    assert names(index) == {"c": 4}


def test_a_created_node_counts_until_its_event_arrives_and_never_overrides_it() -> None:
    index = synced(node("a"))
    index.assume(node("new", cpu="2"))
    assert names(index) == {"a": 4, "new": 2}
    index.apply("ADDED", node("seen", cpu="16", version="11"))
    index.assume(node("seen", cpu="1"))
    assert names(index)["seen"] == 16


def test_without_a_watch_every_read_lists_afresh() -> None:
    index = NodeIndex()
    assert [n.name for n in index.current(lambda: [node("a")])] == ["a"]
    assert [n.name for n in index.current(lambda: [node("b")])] == ["b"]
