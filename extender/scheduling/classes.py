"""Pod classes: the batch's pods grouped by shape for the packer, in the order it packs them.

A class is the pods of one `Shape` (less their labels, which count only through the hostname
terms they match) with the same domain pins and Provisioners left to try: they resolve to the same
Provisioner and requirements and carry the same hostname rules, so the packer places them by the
count. Classes are ordered largest first by the round's sort key, then after the classes they
follow by hostname affinity.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from extender.api.pod import Pod
from extender.scheduling import shape as grouping
from extender.scheduling import shared_claims
from extender.scheduling.candidates import gpu_kinds
from extender.scheduling.fill import PodClass
from extender.scheduling.plan import ExistingNode
from extender.scheduling.requirements import Requirements
from extender.scheduling.resolver import Resolver
from extender.scheduling.shape import Shapes
from extender.scheduling.topology import HostConstraints, NamespaceLabels, Terms

SORT_KEYS = ("cpu", "memory", "euclidean")


def sort_key(name: str, classes: Sequence[PodClass]) -> Callable[[PodClass], Any]:
    if name == "memory":
        return lambda c: (-c.request[1], -c.request[0])
    if name == "euclidean":
        top_cpu = max((c.request[0] for c in classes), default=1) or 1
        top_mem = max((c.request[1] for c in classes), default=1) or 1
        return lambda c: -math.hypot(c.request[0] / top_cpu, c.request[1] / top_mem)
    if name == "cpu":
        return lambda c: (-c.request[0], -c.request[1])
    raise ValueError(f"unknown sort key {name!r}, expected one of {SORT_KEYS}")


def ordering(name: str) -> Callable[[Sequence[PodClass]], list[PodClass]]:
    def order(classes: Sequence[PodClass]) -> list[PodClass]:
        return sorted(classes, key=sort_key(name, classes))

    return order


class Matcher:
    """The hostname terms whose selector matches a pod (they depend on its namespace and labels)."""

    def __init__(self, terms: Terms) -> None:
        self.terms = terms
        self._by_labels: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[int, ...]] = {}
        # Running pods of one owner share one labels object (the bound-pod index interns them):
        # by identity first, which also keeps each labels object alive while its id is a key.
        self._same_labels: dict[tuple[str, int], tuple[Mapping[str, str], tuple[int, ...]]] = {}

    def __call__(self, pod: Pod) -> tuple[int, ...]:
        if (known := self._same_labels.get((pod.namespace, id(pod.labels)))) is not None:
            return known[1]
        label_key = (pod.namespace, tuple(sorted(pod.labels.items())))
        if (found := self._by_labels.get(label_key)) is None:
            found = self._by_labels[label_key] = self.terms.matching(pod)
        self._same_labels[(pod.namespace, id(pod.labels))] = (pod.labels, found)
        return found


def existing_repels(
    existing: Sequence[ExistingNode], terms: Terms, namespaces: NamespaceLabels | None
) -> dict[str, tuple[int, ...]]:
    """Running pods' required hostname anti-affinity terms, interned first so that batch pods see
    what repels them."""
    repels = {}
    for node in existing:
        # A pod without inter-pod rules or a spread has no hostname term (most running pods).
        for pod in (p for p in node.pods if p.pod_anti_affinity or p.pod_affinity or p.topology_spread):
            repels[pod.key] = HostConstraints.of(pod, terms, namespaces, soft=False).repels
    return repels


def build_classes(
    pods: Sequence[Pod],
    *,
    shapes: Shapes,
    resolver: Resolver,
    terms: Terms,
    matcher: Matcher,
    namespaces: NamespaceLabels | None,
    pins: Mapping[str, Requirements],
    skip: Mapping[str, set[str]],
    sort: str,
    shared: frozenset[str] = frozenset(),
) -> list[PodClass]:
    """The pods' classes in packing order. `pins`: each pod's domain pins and exclusions (the domain
    planner's); `skip`: Provisioners each pod is no longer tried on; `shared`: keys of the claims
    counted once per node (shared_claims.shared)."""
    hosts: dict[Hashable, tuple[HostConstraints, HostConstraints]] = {}
    for pod in pods:
        if (host_key := shapes(pod).key(grouping.HOST_RULES)) not in hosts:
            hosts[host_key] = (
                HostConstraints.of(pod, terms, namespaces),
                HostConstraints.of(pod, terms, namespaces, soft=False),
            )
    classes: dict[Hashable, PodClass] = {}
    for pod in pods:
        shape = shapes(pod)
        extra = pins.get(pod.key, Requirements())
        excluded = frozenset(skip.get(pod.key, ()))
        together = shared_claims.of(pod, shared, resolver.dims) if shared and pod.csi_claims else ()
        key = (shape.key(grouping.CLASS), matcher(pod), extra, excluded, together)
        if key in classes:
            classes[key].pods.append(pod)
            continue
        view, term, reqs, reason = resolver.resolve(pod, extra, excluded)
        host, hard_host = hosts[shape.key(grouping.HOST_RULES)]
        classes[key] = PodClass(
            pods=[pod],
            request=shared_claims.shift(resolver.request(pod), (i for i, _ in together), -1.0),
            gpus=gpu_kinds(pod.requests),
            host=host,
            hard_host=hard_host,
            matches=matcher(pod),
            pod_reqs=term,
            view=view,
            reqs=reqs,
            reason=reason,
            ports=pod.host_ports,
            shared=together,
        )
    ordered = sorted(classes.values(), key=sort_key(sort, list(classes.values())))
    # Pods whose hostname affinity points at other pods go after the pods they follow.
    depth = _follow_depth(ordered)
    ordered.sort(key=lambda c: depth[id(c)])
    return ordered


def _follow_depth(classes: Sequence[PodClass]) -> dict[int, int]:
    """0 for a class that follows no other class by hostname affinity, else 1 + its leader's depth."""
    by_term: dict[int, list[PodClass]] = {}
    for c in classes:
        for term in c.matches:
            by_term.setdefault(term, []).append(c)
    leaders = {
        id(c): [d for t in c.host.affinity if t not in c.matches for d in by_term.get(t, ()) if d is not c]
        for c in classes
        if c.host.affinity
    }
    depth: dict[int, int] = {}

    def visit(c: PodClass, path: frozenset[int]) -> int:
        if id(c) not in depth:
            ahead = [visit(d, path | {id(c)}) for d in leaders.get(id(c), ()) if id(d) not in path]
            depth[id(c)] = 1 + max(ahead) if ahead else (1 if leaders.get(id(c)) else 0)
        return depth[id(c)]

    for c in classes:
        visit(c, frozenset())
    return depth
