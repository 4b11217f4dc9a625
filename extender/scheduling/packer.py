"""First-Fit-Descending over classes of identical pods, onto existing nodes and then new ones.

A class is a run of pods with the same requests and constraints, so placing it on a node is one
arithmetic step (how many fit) rather than one step per pod. A new node keeps the requirements
of its pods intersected and may grow while *some* compatible type still holds everything (checked
against the Pareto frontier of allocatable vectors); the cheapest type that holds the final
contents is chosen afterwards by the solver.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from extender.api.pod import Pod
from extender.scheduling.candidates import CandidateCache, ProvisionerView, Vector
from extender.scheduling.plan import ExistingNode
from extender.scheduling.requirements import Requirements
from extender.scheduling.topology import HostConstraints

EPS = 1e-9


@dataclass
class PodClass:
    pods: list[Pod]
    request: Vector
    gpus: frozenset[str]
    host: HostConstraints
    #: Hostname-level term ids whose selector matches these pods.
    matches: tuple[int, ...]
    #: Pod-only requirements (chosen term, zone pin): what an existing node's labels must satisfy.
    pod_reqs: Requirements
    view: ProvisionerView | None = None
    #: Provisioner + pod requirements for a new node; None when no provisioner can take the pods.
    reqs: Requirements | None = None
    reason: str = ""


@dataclass
class Node:
    frontier: tuple[Vector, ...]
    used: Vector
    view: ProvisionerView | None = None
    reqs: Requirements | None = None
    gpus: frozenset[str] = frozenset()
    existing: ExistingNode | None = None
    pods: list[Pod] = field(default_factory=list)
    term_counts: Counter[int] = field(default_factory=Counter)
    anti: set[int] = field(default_factory=set)
    closed: bool = False

    def room(self, request: Vector, frontier: Sequence[Vector] | None = None) -> int:
        """How many more pods of `request` fit on some type of the frontier."""
        best = 0
        for capacity in frontier if frontier is not None else self.frontier:
            count = math.inf
            for cap, use, req in zip(capacity, self.used, request, strict=True):
                if req > 0:
                    count = min(count, math.floor((cap - use + EPS) / req))
                elif use > cap + EPS:
                    count = 0
            best = max(best, int(count) if count != math.inf else 1 << 30)
        return best

    def add(self, pod_class: PodClass, pods: Sequence[Pod]) -> None:
        n = len(pods)
        self.used = tuple(u + n * r for u, r in zip(self.used, pod_class.request, strict=True))
        self.pods.extend(pods)
        for term in pod_class.matches:
            self.term_counts[term] += n
        self.anti.update(pod_class.host.anti)


class Packer:
    def __init__(self, cache: CandidateCache, min_request: Vector, universal_terms: frozenset[int]) -> None:
        self.cache = cache
        self.min_request = min_request
        # Terms every pod of the batch matches: a node whose pods are anti-affine to one takes nothing more.
        self.universal_terms = universal_terms
        self.nodes: list[Node] = []
        self.open: list[Node] = []
        self.existing: list[Node] = []
        self.placed_by_term: Counter[int] = Counter()
        self._intersections: dict[tuple[Requirements, Requirements], Requirements | None] = {}

    def add_existing(self, node: ExistingNode, dims: Sequence[str]) -> None:
        free = tuple(
            (node.allocatable.get(d) - node.pod_count) if d == "pods" else node.allocatable.get(d)
            for d in dims
        )
        used = tuple(0.0 if d == "pods" else node.requested.get(d) for d in dims)
        self.existing.append(Node(frontier=(free,), used=used, existing=node))

    def topology_cap(self, node: Node, pod_class: PodClass, want: int) -> int:
        cap = want
        host = pod_class.host
        for term in host.anti:
            if node.term_counts[term]:
                return 0
            if term in pod_class.matches:
                cap = min(cap, 1)
        if node.anti and any(term in node.anti for term in pod_class.matches):
            return 0
        for term, skew in host.spread:
            if term in pod_class.matches:
                cap = min(cap, skew - node.term_counts[term])
        for term in host.affinity:
            if self.placed_by_term[term] and not node.term_counts[term]:
                return 0
        return max(cap, 0)

    def _merge(
        self, node_reqs: Requirements, class_reqs: Requirements, keys: frozenset[str]
    ) -> Requirements | None:
        key = (node_reqs, class_reqs)
        if key not in self._intersections:
            merged = node_reqs.intersect(class_reqs)
            self._intersections[key] = None if merged.conflict(keys) else merged
        return self._intersections[key]

    def try_node(self, node: Node, pod_class: PodClass, pending: list[Pod]) -> list[Pod]:
        """Place as many of `pending` as fit on `node`; returns the pods still pending."""
        if node.existing is not None:
            frontier = node.frontier
            if pod_class.pods[0].tolerates(node.existing.taints) is not None:
                return pending
            if not pod_class.pod_reqs.matches(node.existing.labels):
                return pending
            merged = None
        else:
            if node.view is not pod_class.view or node.gpus != pod_class.gpus or pod_class.reqs is None:
                return pending
            assert node.reqs is not None and node.view is not None
            merged = self._merge(node.reqs, pod_class.reqs, node.view.keys)
            if merged is None:
                return pending
            frontier = (
                node.frontier
                if merged == node.reqs
                else self.cache.lookup(node.view, merged, node.gpus).frontier
            )
        count = min(self.topology_cap(node, pod_class, len(pending)), node.room(pod_class.request, frontier))
        if count <= 0:
            return pending
        if merged is not None and merged != node.reqs:
            node.reqs, node.frontier = merged, frontier
        node.add(pod_class, pending[:count])
        for term in pod_class.matches:
            self.placed_by_term[term] += count
        if node.room(self.min_request) == 0 or not node.anti.isdisjoint(self.universal_terms):
            node.closed = True
        return pending[count:]

    def place(self, pod_class: PodClass, unschedulable: Callable[[Pod, str], None]) -> None:
        pending = list(pod_class.pods)
        for node in self.existing:
            if not pending:
                return
            pending = self.try_node(node, pod_class, pending)
        if pod_class.reqs is None or pod_class.view is None:
            for pod in pending:
                unschedulable(pod, pod_class.reason)
            return
        for node in self.open:
            if not pending:
                break
            if not node.closed:
                pending = self.try_node(node, pod_class, pending)
        # Closed nodes never take another pod: drop them so first-fit stays proportional to open nodes.
        self.open = [n for n in self.open if not n.closed]
        while pending:
            frontier = self.cache.lookup(pod_class.view, pod_class.reqs, pod_class.gpus).frontier
            node = Node(
                frontier=frontier,
                used=tuple(0.0 for _ in pod_class.request),
                view=pod_class.view,
                reqs=pod_class.reqs,
                gpus=pod_class.gpus,
            )
            left = self.try_node(node, pod_class, pending)
            if len(left) == len(pending):
                reason = "pod (anti-)affinity or topology spread on kubernetes.io/hostname cannot be met"
                if node.room(pod_class.request) == 0:
                    reason = "no instance type has room for the pod's requests"
                for pod in pending:
                    unschedulable(pod, reason)
                return
            self.nodes.append(node)
            if not node.closed:
                self.open.append(node)
            pending = left
