"""What a fill works on: classes of identical pods, a pass's cursors over them, and a node with
the pods it holds (new or existing). The placement rule itself is `Packer.can_take` (packer.py).
"""

from __future__ import annotations

import itertools
import operator
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from extender.api.affinity import HostPort
from extender.api.pod import Pod
from extender.api.resources import Resources
from extender.scheduling import shared_claims
from extender.scheduling.candidates import ProvisionerView, Vector, fit_count
from extender.scheduling.memo import serial
from extender.scheduling.plan import ExistingNode
from extender.scheduling.requirements import Requirements
from extender.scheduling.topology import HostConstraints


@dataclass(eq=False)
class PodClass:
    pods: list[Pod]
    request: Vector
    gpus: frozenset[str]
    host: HostConstraints
    #: `host` without preferences: what remains when the preferences cannot be met.
    hard_host: HostConstraints
    #: Hostname-level term ids whose selector matches these pods.
    matches: tuple[int, ...]
    #: Pod-only requirements (chosen term, zone pin): what an existing node's labels must satisfy.
    pod_reqs: Requirements
    view: ProvisionerView | None = None
    #: Provisioner + pod requirements for a new node; None when no provisioner can take the pods.
    reqs: Requirements | None = None
    reason: str = ""
    ports: tuple[HostPort, ...] = ()
    #: $/h each pod is worth (its cheapest $/pod alone); set by the packer.
    rate: float = 0.0
    #: Claims the pods share with other pods (shared_claims.py): charged once per node, not in `request`.
    shared: shared_claims.Shared = ()
    #: The class in memo keys (memo.py).
    serial: int = field(default_factory=serial, init=False, repr=False)


class Cursors:
    """Where each class's pending pods start in one pass (its first pod not yet placed). A pass
    owns its cursors (`Packer.cursors`, a copy kept in `State`), so the passes forked from one
    start never move the shared classes or each other's."""

    __slots__ = ("_next",)

    def __init__(self, start: Mapping[PodClass, int] | None = None) -> None:
        self._next: dict[PodClass, int] = dict(start) if start else {}

    def positions(self, classes: Sequence[PodClass]) -> tuple[int, ...]:
        """The classes' cursors, in order (a memo key)."""
        return tuple(map(self._next.get, classes, itertools.repeat(0)))

    def left(self, pod_class: PodClass) -> int:
        return len(pod_class.pods) - self._next.get(pod_class, 0)

    def pending(self, pod_class: PodClass) -> list[Pod]:
        return pod_class.pods[self._next.get(pod_class, 0) :]

    def take(self, pod_class: PodClass, count: int) -> list[Pod]:
        """The class's next `count` pending pods, now placed."""
        start = self._next.get(pod_class, 0)
        self._next[pod_class] = start + count
        return pod_class.pods[start : start + count]

    def copy(self) -> Cursors:
        return Cursors(self._next)


@dataclass(eq=False)
class Node:
    capacity: Vector
    used: Vector
    view: ProvisionerView | None = None
    reqs: Requirements | None = None
    gpus: frozenset[str] = frozenset()
    existing: ExistingNode | None = None
    pods: list[Pod] = field(default_factory=list)
    #: (class, count) in placement order, so a merge can replay the topology checks.
    entries: list[tuple[PodClass, int]] = field(default_factory=list)
    term_counts: Counter[int] = field(default_factory=Counter)
    #: Required anti-affinity terms of the pods on the node: pods they select may not join.
    anti: set[int] = field(default_factory=set)
    ports: list[HostPort] = field(default_factory=list)
    #: term -> the smallest hostname maxSkew of the pods here that spread over it: more matching
    #: pods would break their spread in the final cluster, whatever order the binds take.
    spread_caps: dict[int, int] = field(default_factory=dict)
    #: What this node took from its Provisioner's limits headroom (each resource they name).
    charged: Resources = field(default_factory=Resources)
    #: Keys of the claims its pods hold: a shared claim is charged to the node once.
    claims: set[str] = field(default_factory=set)
    #: A new node's instance type, and whether `reqs` are known to allow it (a trial's type comes
    #: from its seed's own requirements; a rounding pattern's may not).
    type_name: str = ""
    type_allowed: bool = True

    def room(self, request: Vector) -> int:
        """fit_count(request, capacity - used), without building the difference (the fills' hot call)."""
        count: float = 1 << 30
        for req, cap, used in zip(request, self.capacity, self.used, strict=True):
            if req > 0:
                fits = (cap - used + 1e-9) // req
                if fits < count:
                    count = fits
            elif cap - used < -1e-9:
                return 0
        return int(count) if count > 0 else 0

    def room_for(self, pod_class: PodClass) -> int:
        """How many of the class's pods fit, its shared claims new to the node charged once."""
        if not pod_class.shared:
            return self.room(pod_class.request)
        free = tuple(map(operator.sub, self.capacity, self.used))
        if pod_class.shared:
            free = shared_claims.shift(free, shared_claims.new_on(self.claims, pod_class.shared), -1.0)
        return fit_count(pod_class.request, free)

    def after(self, pod_class: PodClass, count: int) -> Vector:
        """What the node would use with `count` more of the class's pods."""
        used = tuple([u + count * r for u, r in zip(self.used, pod_class.request, strict=True)])
        if pod_class.shared and count > 0:
            used = shared_claims.shift(used, shared_claims.new_on(self.claims, pod_class.shared), 1.0)
        return used

    def add(self, pod_class: PodClass, count: int) -> None:
        self.used = self.after(pod_class, count)
        if pod_class.shared and count > 0:
            self.claims.update(claim for _, claim in pod_class.shared)
        self.entries.append((pod_class, count))
        counts = self.term_counts
        for term in pod_class.matches:
            counts[term] = counts.get(term, 0) + count  # not `+=`: Counter.__missing__ is a Python call
        self.anti.update(pod_class.host.repels)
        self.ports.extend(pod_class.ports)
        for term, skew in pod_class.host.spread:
            self.spread_caps[term] = min(skew, self.spread_caps.get(term, skew))


def ruled(pod_class: PodClass) -> bool:
    """Whether the class's placement depends on other pods' (hostname rules, host ports)."""
    host = pod_class.host
    return bool(
        pod_class.matches or pod_class.ports or host.anti or host.affinity or host.spread or host.repels
    )
