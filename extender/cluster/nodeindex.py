"""The node index: every Node of the cluster as the api's Node model, kept by one list-then-watch.

A batch plans against every node (their pods and topology domains count); listing and parsing
5,000 nodes per batch took seconds of each batch and tens of MB of JSON at once. The index parses
a node once per event. Nodes karpy creates are counted at once (`assume`), before their watch
events arrive, so the next batch sees them; the re-check before each bind reads the node afresh.
A node whose manifest karpy cannot parse is left out (logged), as it could not be planned on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kubernetes import client

from extender.api.node import Node
from extender.cluster import objects
from extender.cluster.informer import WatchedIndex

log = logging.getLogger("karpy.informer")


def _parse(manifest: Mapping[str, Any]) -> Node | None:
    try:
        return Node.from_manifest(manifest)
    except Exception as err:  # a node karpy cannot read must not stop the watch
        log.warning("Ignoring node %s, %s", objects.name(manifest), err)
        return None


class NodeIndex(WatchedIndex):
    name = "nodes"

    def __init__(self) -> None:
        super().__init__()
        self._nodes: dict[str, Node] = {}

    def list_function(self, kube: client.ApiClient) -> tuple[Callable[..., Any], dict[str, Any]]:
        return client.CoreV1Api(kube).list_node, {}

    def replace(self, items: Iterable[Mapping[str, Any]], resource_version: str) -> None:
        fresh = {node.name: node for node in map(_parse, items) if node is not None}
        with self._lock:
            self._nodes = fresh
            self.resource_version = resource_version
            self.relists += 1
        self.synced.set()

    def apply(self, kind: str, manifest: Mapping[str, Any]) -> None:
        version = objects.resource_version(manifest) or self.resource_version
        node = None if kind in ("DELETED", "BOOKMARK") else _parse(manifest)
        with self._lock:
            if kind != "BOOKMARK":
                if node is None:
                    self._nodes.pop(objects.name(manifest), None)
                else:
                    self._nodes[node.name] = node
            self.resource_version = version

    def assume(self, manifest: Mapping[str, Any]) -> None:
        """karpy just created this Node: count it now, before its watch event arrives."""
        if (node := _parse(manifest)) is not None:
            with self._lock:
                self._nodes.setdefault(node.name, node)

    def get(self, name: str) -> Node | None:
        """One node as the index holds it now (no listing)."""
        with self._lock:
            return self._nodes.get(name)

    def current(self, list_now: Callable[[], Iterable[Mapping[str, Any]]]) -> list[Node]:
        """Every node as the watch keeps it (waiting for its first listing), or, without a running
        watch, as `list_now()` lists them."""
        self.wait_synced(list_now)
        with self._lock:
            return list(self._nodes.values())
