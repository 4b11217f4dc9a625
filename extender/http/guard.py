"""The extender's decisions, on plain data: which nodes to fail, how to score them.

O(nodes) dict lookups: this runs inside kube-scheduler's serialized scheduling cycle.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from extender.api.pod import Pod, PodError
from extender.api.resources import Resources
from extender.cluster import objects
from extender.state import ClusterState, Hold

MAX_SCORE = 10

log = logging.getLogger("karpy.extender")


@dataclass
class FilterResult:
    node_names: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    #: How many of `failed` are marked for removal and how many are reserved (for metrics).
    removal: int = 0
    reserved: int = 0
    #: The pod is karpy's to place (claimed by a batch): every node failed, no fast path.
    claimed: bool = False

    def wire(self, items: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Any]:
        """ExtenderFilterResult: every input node is kept or failed. With nodeCacheCapable the kept
        nodes are `NodeNames`; without it kube-scheduler sent Node objects (`items`) and reads only
        `Nodes`, so the kept ones are echoed there (a null `Nodes` would mean "no node fits")."""
        nodes = None
        if items is not None:
            kept = set(self.node_names)
            nodes = {"items": [item for item in items if _item_name(item) in kept]}
        return {
            "Nodes": nodes,
            "NodeNames": self.node_names,
            "FailedNodes": {},
            "FailedAndUnresolvableNodes": self.failed,
            "Error": "",
        }


def _requests(pod: Mapping[str, Any]) -> Resources | None:
    try:
        return Pod.from_manifest(pod).requests
    except PodError:
        return None


def filter_nodes(state: ClusterState, pod: Mapping[str, Any], names: Sequence[str]) -> FilterResult:
    """Fail nodes karpy is about to remove, and nodes whose room karpy has promised to other pods
    (pods it is binding, pods it launched a node for that kube-scheduler binds), as
    FailedAndUnresolvable, so preemption does not pick them either. A pod karpy is placing itself
    gets no node at all: two placements would leave karpy's new node empty. A pod holding room is
    kube-scheduler's to place, even while a batch has it."""
    result = FilterResult()
    key = objects.pod_key(pod)
    own = _own_hold(state, key, pod)
    if state.claimed(key) and own is None:
        result.claimed = True
        result.failed = {name: "karpy: provisioning a node for this pod" for name in names}
        return result
    marked = state.marked()
    reserving = state.reserved_nodes()
    # Only the few marked or reserved nodes need a look; the thousands of others pass as they are.
    watched = marked.keys() | reserving
    requests: Resources | None = None
    for name in watched.intersection(names) if watched else ():
        reason = marked.get(name)
        if reason is not None:
            result.failed[name] = f"karpy: node {reason}"
            result.removal += 1
            continue
        if own is not None and own.node == name:
            # The plan gave this pod its room here beside the others held on the node: they never
            # refuse it, even before the node cache has the node (the next batch adds it).
            continue
        count, reserved = state.reservation(name, excluding=key)
        if count:
            if requests is None:
                requests = _requests(pod) or Resources()
            info = state.node(name)
            room = info.allocatable - info.requested - reserved if info else None
            if room is None or not requests.fits_in(room):
                result.failed[name] = f"karpy: room reserved for {count} other pod(s)"
                result.reserved += 1
    failed = result.failed
    result.node_names = [name for name in names if name not in failed] if failed else list(names)
    return result


def _own_hold(state: ClusterState, key: str, pod: Mapping[str, Any]) -> Hold | None:
    """The pod's hold; a hold under its name for an earlier pod (a StatefulSet re-creates a pod
    under the same name, with a new uid) ends here: that pod no longer exists."""
    hold = state.held(key)
    if hold is None or not hold.pod.uid:
        return hold
    meta = pod.get("metadata")
    uid = meta.get("uid") if isinstance(meta, Mapping) else None
    if not uid or uid == hold.pod.uid:
        return hold
    if (ended := state.unhold(key)) is not None:
        log.info(
            "Released the room held on node %s for pod %s (uid %s), which no longer exists",
            ended.node,
            key,
            ended.pod.uid,
        )
    return None


def prioritize(
    state: ClusterState, names: Sequence[str], pod: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """HostPriorityList: 10 for nodes karpy keeps, 0 for nodes it plans to remove; a pod whose
    room karpy holds on a node scores the other nodes 5, so the node launched for it is preferred.
    For configurations that still register the prioritize verb: the shipped one does not (the
    disrupted taint and the pod's nominatedNodeName say the same to kube-scheduler)."""
    marked = state.marked()
    hold = state.held(objects.pod_key(pod)) if isinstance(pod, Mapping) else None

    def score(name: str) -> int:
        if name in marked:
            return 0
        return MAX_SCORE if hold is None or name == hold.node else MAX_SCORE // 2

    return [{"Host": name, "Score": score(name)} for name in names]


def has_preference(state: ClusterState, names: Sequence[str], pod: Mapping[str, Any] | None = None) -> bool:
    """Whether `prioritize` would score these nodes unequally: one is marked for removal or the pod
    holds room. Otherwise every node scores the same, which changes no ranking."""
    if isinstance(pod, Mapping) and state.held(objects.pod_key(pod)) is not None:
        return True
    marked = state.marked()
    return bool(marked) and not marked.keys().isdisjoint(names)


class BadArgs(ValueError):
    """ExtenderArgs of the wrong shape; answered with a 200 whose Error says why."""


def _item_name(item: Any) -> str:
    meta = item.get("metadata") if isinstance(item, Mapping) else None
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return name if isinstance(name, str) else ""


def node_items(args: Mapping[str, Any]) -> list[Mapping[str, Any]] | None:
    """The Node objects kube-scheduler sent (nodeCacheCapable: false), or None when it sent names."""
    if args.get("NodeNames") is not None:
        return None
    nodes = args.get("Nodes")
    if not isinstance(nodes, Mapping):
        return None
    items = nodes.get("items") or []
    return [item for item in items if isinstance(item, Mapping)] if isinstance(items, list) else None


def node_names(args: Mapping[str, Any]) -> list[str]:
    """NodeNames (nodeCacheCapable), else the names of Nodes.items; BadArgs for other shapes."""
    names = args.get("NodeNames")
    if names is not None:
        if not isinstance(names, list) or not set(map(type, names)) <= {str}:
            raise BadArgs("NodeNames is not a list of names")
        return names
    nodes = args.get("Nodes")
    if nodes is None:
        return []
    if not isinstance(nodes, Mapping) or not isinstance(nodes.get("items") or [], list):
        raise BadArgs("Nodes is not a NodeList")
    return [_item_name(item) for item in nodes.get("items") or []]


def fast_path(result: FilterResult, names: Sequence[str], pod: Mapping[str, Any], enqueue: Callable) -> bool:
    """When the guard (not kube-scheduler) left the pod no node, provision for it now."""
    if names and not result.node_names and pod and not result.claimed:
        enqueue([pod])
        return True
    return False
