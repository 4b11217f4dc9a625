"""Per-Provisioner view of the catalog: allocatable after DaemonSets, and which types meet a requirement set.

Vectors are tuples over the batch's resource dimensions (cpu, memory, pods, then any extended
resource requested), so the packer compares plain floats. `CandidateCache.lookup` memoises
"types compatible with (provisioner, requirements, GPU kinds)" — the solver asks the same few
questions thousands of times — and `pod_rate` the cheapest $/pod for a request on such a set.

Burstable (t-family) types are candidates only when the requirements list instance types by name
(an `In` set). Their list price buys a CPU baseline of 5-40 % per vCPU; a node packed to its
pods' CPU requests runs above it and, in the default `unlimited` credit mode, is billed for the
surplus, so the list price understates what such a node costs. Karpenter 0.5 offered them
anyway; karpy does not by default. The plan and the lower bound both read `lookup`, so they
agree on the catalog.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Hashable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, TypeVar, cast

from extender.api import labels as wk
from extender.api.affinity import HostPort
from extender.api.pod import Pod
from extender.api.provisioner import Provisioner
from extender.api.resources import ACCELERATOR_RESOURCES, PODS, Resources
from extender.scheduling import attach
from extender.scheduling.constraints import (
    MinValues,
    defined_keys,
    min_values,
    pod_terms,
    provisioner_requirements,
)
from extender.scheduling.instancetypes import InstanceType, NodeSettings, Offering, OfferingKey
from extender.scheduling.memo import serial
from extender.scheduling.overlays import overlaid
from extender.scheduling.pricing import ESTIMATE
from extender.scheduling.requirements import Requirements
from extender.scheduling.reservations import offering_allows, own_offerings, selects

Vector = tuple[float, ...]

#: Instance types a launch offers at most (Karpenter's MaxInstanceTypes).
MAX_OPTIONS = 60
#: Candidate sets a view keeps across solves (one per requirement set asked); cleared when full.
MAX_KEPT_SETS = 1024
#: Entries one CandidateSet's memo keeps (requests and fills asked of it); cleared when full.
MAX_MEMO = 4096
_MISSING = object()
T = TypeVar("T")


def vector(resources: Resources, dims: Sequence[str]) -> Vector:
    return tuple(resources.get(d) for d in dims)


def fits(used: Vector, capacity: Vector) -> bool:
    return all(u <= c + 1e-9 for u, c in zip(used, capacity, strict=True))


def gpu_kinds(resources: Resources) -> frozenset[str]:
    """The accelerator kinds (GPU, Neuron, Gaudi) `resources` asks for or has; EFA is not one."""
    return frozenset(name for name in ACCELERATOR_RESOURCES if resources.get(name) > 0)


@dataclass(frozen=True)
class Entry:
    """One instance type as a node of one Provisioner: allocatable after DaemonSets."""

    type: InstanceType
    alloc: Vector
    daemons: int


@dataclass(frozen=True)
class Candidate:
    entry: Entry
    offering: Offering
    #: The object in memo keys (memo.py); not part of its value.
    serial: int = field(default_factory=serial, init=False, compare=False, repr=False)

    @property
    def estimated(self) -> bool:
        """Priced by the estimate: the type is in no price table (pricing.py)."""
        return self.offering.price_source == ESTIMATE


def fit_count(request: Vector, free: Vector) -> int:
    """How many pods of `request` fit in `free` (a large number when the request is all zeros)."""
    # The packer's innermost call: plain comparisons rather than min()/int() per dimension.
    count: float = 1 << 30
    for req, room in zip(request, free, strict=True):
        if req > 0:
            fits = (room + 1e-9) // req
            if fits < count:
                count = fits
        elif room < -1e-9:
            return 0
    return int(count) if count > 0 else 0


@dataclass(frozen=True, eq=False)
class CandidateSet:
    """Compatible types, priced ones cheapest first and then estimated ones cheapest first; compared
    by identity (the cache hands out one per question).

    `memo` holds what is derived from the set alone (the types holding a request, their ranking,
    the node options for a fill), so it lasts as long as the set: across solves, while views.py
    keeps the view. Cleared when it holds MAX_MEMO entries."""

    candidates: tuple[Candidate, ...]
    names: frozenset[str]
    memo: dict[Hashable, Any] = field(default_factory=dict, repr=False)

    def remember(self, key: Hashable, compute: Callable[[], T]) -> T:
        """`compute()`, once per key while the memo holds it."""
        found = self.memo.get(key, _MISSING)
        if found is _MISSING:
            if len(self.memo) >= MAX_MEMO:
                self.memo.clear()
            found = self.memo[key] = compute()
        return cast(T, found)


def _daemon_fits_type(
    daemon: Pod, instance_type: InstanceType, base: Requirements, keys: frozenset[str]
) -> bool:
    labels = instance_type.labels()
    for term in pod_terms(daemon):
        reqs = base.intersect(term)
        if all(reqs.allows(k, v) for k, v in labels.items()) and reqs.conflict(keys) is None:
            return True
    return False


def _with_volumes(alloc: Vector, instance_type: InstanceType, dims: Sequence[str]) -> Vector:
    """The attach-limit dimensions of a new node: the type's known limit, else unlimited."""
    result = list(alloc)
    for i, dim in enumerate(dims):
        if driver := attach.driver_of(dim):
            limit = instance_type.volume_limit(driver)
            result[i] = float(attach.UNLIMITED if limit is None else limit)
    return tuple(result)


@dataclass
class ProvisionerView:
    provisioner: Provisioner
    requirements: Requirements
    keys: frozenset[str]
    entries: list[Entry]
    excluded: list[str]
    #: Host ports of the DaemonSet pods that may land on the view's nodes: kept free on new nodes.
    daemon_ports: tuple[HostPort, ...] = ()
    #: (pod accelerator kinds, requested names) -> unlisted names; asked once per pod shape.
    _unlisted: dict[tuple[frozenset[str], frozenset[str]], tuple[str, ...]] = field(default_factory=dict)
    #: (requirements, accelerator kinds, unavailable offerings) -> the compatible types. Lives as
    #: long as the view, which views.py keeps across solves while the catalog is unchanged.
    _sets: dict[tuple[Requirements, frozenset[str], frozenset[OfferingKey]], CandidateSet] = field(
        default_factory=dict
    )
    #: The object in memo keys (memo.py).
    serial: int = field(default_factory=serial, init=False, compare=False, repr=False)

    @classmethod
    def build(
        cls,
        provisioner: Provisioner,
        instance_types: Sequence[InstanceType],
        daemonsets: Sequence[Pod],
        dims: Sequence[str],
    ) -> ProvisionerView:
        reqs, keys = provisioner_requirements(provisioner), defined_keys(provisioner)
        daemons = [d for d in daemonsets if d.tolerates(provisioner.taints) is None]
        settings = NodeSettings.of(provisioner.kubelet, provisioner.provider)
        entries, excluded = [], []
        landed: dict[str, Pod] = {}
        # The pool's NodeOverlays first (prices, extended capacity), then its node settings.
        for instance_type in overlaid(own_offerings(instance_types, provisioner), provisioner):
            instance_type = instance_type.for_node(settings)
            if reason := instance_type.fits_overhead():
                excluded.append(f"Excluding instance type {instance_type.name}: {reason}")
                continue
            landing = [d for d in daemons if _daemon_fits_type(d, instance_type, reqs, keys)]
            landed.update((d.key, d) for d in landing)
            overhead = Resources({"pods": len(landing)})
            for daemon in landing:
                overhead = overhead + daemon.requests
            alloc = instance_type.allocatable - overhead
            if not overhead.fits_in(instance_type.allocatable):
                excluded.append(
                    f"Excluding instance type {instance_type.name}: not enough resources for daemons"
                    f" ({provisioner.noun} {provisioner.name})"
                )
                continue
            entries.append(
                Entry(instance_type, _with_volumes(vector(alloc, dims), instance_type, dims), len(landing))
            )
        ports = tuple(port for daemon in landed.values() for port in daemon.host_ports)
        return cls(provisioner, reqs, keys, entries, excluded, daemon_ports=ports)

    @cached_property
    def min_values(self) -> MinValues:
        """The NodePool's minValues by key; () for most Provisioners, which skip every check."""
        return min_values(self.provisioner)

    @cached_property
    def accelerator_kinds(self) -> frozenset[frozenset[str]]:
        """The accelerator kinds of the view's types, each set once (the empty one for plain types)."""
        return frozenset(gpus_of(e.type) for e in self.entries)

    def unlisted(self, requests: Resources) -> tuple[str, ...]:
        """Requested resources that no instance type the pod may use lists, sorted.

        kube-scheduler NodeResourcesFit: a resource the node does not list has allocatable 0, so a
        pod requesting one (hugepages-2Mi, example.com/foo) fits no node this Provisioner launches.
        The types considered are those the accelerator rule lets serve the pod (an EFA-only pod
        does not count a GPU type's EFA), or all of them when none may; () when the view is empty.
        """
        kinds, names = gpu_kinds(requests), requests.names() - {PODS}
        memo = (kinds, names)
        if (found := self._unlisted.get(memo)) is None:
            usable = [e for e in self.entries if serves(gpus_of(e.type), kinds)] or self.entries
            found = self._unlisted[memo] = tuple(
                sorted(n for n in names if usable and all(e.type.allocatable.get(n) <= 0 for e in usable))
            )
        return found


class CandidateCache:
    def __init__(self, unavailable: Collection[OfferingKey], max_options: int = MAX_OPTIONS) -> None:
        self.unavailable = frozenset(unavailable)
        #: Instance types a node may offer at launch (CreateFleet overrides); minValues must fit in it.
        self.max_options = max_options
        self._memo: dict[tuple[str, Requirements, frozenset[str]], CandidateSet] = {}

    def cheapest_offering(
        self, instance_type: InstanceType, reqs: Requirements, reserving: bool = True
    ) -> Offering | None:
        """The type's cheapest offering `reqs` allow; `reserving=False` says `reqs` name no
        capacity-reservation label (`selects`), so every offering passes that check."""
        zones, capacity_types = reqs.get(wk.ZONE), reqs.get(wk.CAPACITY_TYPE)
        best = None
        for offering in instance_type.offerings:
            if (
                not offering.available
                or (instance_type.name, offering.zone, offering.capacity_type) in self.unavailable
            ):
                continue
            allowed = (
                zones.contains(offering.zone)
                and capacity_types.contains(offering.capacity_type)
                and (not reserving or offering_allows(offering, reqs))
            )
            if allowed and (best is None or offering.price < best.price):
                best = offering
        return best

    def lookup(self, view: ProvisionerView, reqs: Requirements, gpus: frozenset[str]) -> CandidateSet:
        key = (view.provisioner.name, reqs, gpus)
        if (found := self._memo.get(key)) is not None:
            return found
        kept = (reqs, gpus, self.unavailable)
        if (found := view._sets.get(kept)) is not None:
            self._memo[key] = found
            return found
        names, arches, oses = reqs.get(wk.INSTANCE_TYPE), reqs.get(wk.ARCH), reqs.get(wk.OS)
        # karpenter.k8s.aws/* keys: the type's own labels decide; a type without one is "absent".
        described = Requirements(tuple((k, v) for k, v in reqs if k in wk.INSTANCE_TYPE_LABELS))
        # Asked once, not per offering: the first solve and each new requirement set scan every
        # offering of the catalog, and almost no requirements name a reservation.
        reserving = selects(reqs)
        candidates = []
        for entry in view.entries:
            instance_type = entry.type
            if not serves(gpus_of(instance_type), gpus):
                continue
            if instance_type.burstable and names.complement:
                continue
            if not (
                names.contains(instance_type.name)
                and arches.contains(instance_type.arch)
                and oses.contains(instance_type.os)
                and (not described.items or described.matches(dict(instance_type.type_labels)))
            ):
                continue
            offering = self.cheapest_offering(instance_type, reqs, reserving)
            if offering is not None:
                candidates.append(Candidate(entry, offering))
        # An estimate is a guess: a type with a known price always ranks before one without.
        candidates.sort(key=lambda c: (c.estimated, c.offering.price, c.entry.type.name))
        found = CandidateSet(tuple(candidates), frozenset(c.entry.type.name for c in candidates))
        self._memo[key] = found
        if len(view._sets) >= MAX_KEPT_SETS:
            view._sets.clear()
        view._sets[kept] = found
        return found

    def usable(self, found: CandidateSet, request: Vector) -> tuple[Candidate, ...]:
        """The set's types that hold one pod of `request`: the priced ones, or — only when no priced
        type holds it — the estimated ones. So an estimate never makes a type look cheap enough to
        win over a type with a real price."""
        return self.counted(found, request)[0]

    def counted(self, found: CandidateSet, request: Vector) -> tuple[tuple[Candidate, ...], tuple[int, ...]]:
        """`usable`, and how many pods of `request` each holds: a new request's first round asks the
        types, their rate and their ranking, which would each count the set again. Two tuples, not
        a pair per type: the memo keeps them, and a tracked object per type would add to every
        collection's work."""

        def compute() -> tuple[tuple[Candidate, ...], tuple[int, ...]]:
            candidates = found.candidates
            counts = [fit_count(request, c.entry.alloc) for c in candidates]
            kept = [i for i, c in enumerate(candidates) if counts[i] and not c.estimated] or [
                i for i, count in enumerate(counts) if count
            ]
            return tuple(candidates[i] for i in kept), tuple(counts[i] for i in kept)

        return found.remember(("counted", request), compute)

    def frontier(self, found: CandidateSet, request: Vector) -> tuple[Candidate, ...]:
        """`usable` less the types another one beats on every resource at no higher price: only these
        can be the cheapest way to buy some mix of resources. Cheapest first.

        A type that beats one holding the pod holds it too, so the set's frontier (priced and
        estimated types apart, as `usable` keeps them) is computed once and filtered per request."""
        return found.remember(("frontier", request), lambda: self._frontier(found, request))

    def _frontier(self, found: CandidateSet, request: Vector) -> tuple[Candidate, ...]:
        if (memo := found.memo.get("frontier")) is None:
            kept: list[Candidate] = []
            top: dict[bool, Vector] = {}
            for c in sorted(
                found.candidates, key=lambda c: (c.estimated, c.offering.price, c.entry.type.name)
            ):
                alloc = c.entry.alloc
                most = top.get(c.estimated, tuple(-math.inf for _ in alloc))
                # More of some resource than every cheaper type: nothing beats it, no scan needed.
                if any(a > m for a, m in zip(alloc, most, strict=True)) or not any(
                    k.estimated == c.estimated
                    and all(a >= b for a, b in zip(k.entry.alloc, alloc, strict=True))
                    for k in kept
                ):
                    kept.append(c)
                    top[c.estimated] = tuple(max(a, m) for a, m in zip(alloc, most, strict=True))
            memo = found.memo["frontier"] = tuple(kept)
        holding = [c for c in memo if fit_count(request, c.entry.alloc)]
        return tuple(c for c in holding if not c.estimated) or tuple(holding)

    def pod_rate(self, found: CandidateSet, request: Vector) -> float:
        """Cheapest $/h per pod when nodes of this set hold only pods of `request` (inf if none fits)."""
        return found.remember(
            ("rate", request),
            lambda: min(
                (c.offering.price / count for c, count in zip(*self.counted(found, request), strict=True)),
                default=math.inf,
            ),
        )


def gpus_of(instance_type: InstanceType) -> frozenset[str]:
    return gpu_kinds(instance_type.gpus)


def serves(type_kinds: frozenset[str], pod_kinds: frozenset[str]) -> bool:
    """Accelerator types only serve pods asking for an accelerator (Karpenter 0.5 packable.go), and
    such a pod needs every kind it asks for. EFA is no accelerator kind: it never excludes a type."""
    return pod_kinds <= type_kinds if pod_kinds else not type_kinds
