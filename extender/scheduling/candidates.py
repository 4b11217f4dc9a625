"""Per-Provisioner view of the catalog: allocatable after DaemonSets, and which types meet a requirement set.

Vectors are tuples over the batch's resource dimensions (cpu, memory, pods, then any extended
resource requested), so the packer compares plain floats. `CandidateCache.lookup` memoises
"types compatible with (provisioner, requirements, GPU kinds)" — the solver asks the same few
questions thousands of times.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from extender.api import labels as wk
from extender.api.pod import Pod
from extender.api.provisioner import Provisioner
from extender.api.resources import GPU_RESOURCES, Resources
from extender.scheduling import lowerbound
from extender.scheduling.constraints import defined_keys, pod_terms, provisioner_requirements
from extender.scheduling.instancetypes import InstanceType, Offering
from extender.scheduling.requirements import Requirements

Vector = tuple[float, ...]
#: How much dearer than the catalog's best $/resource a type may be and still be grown into.
GROWTH_SLACK = 0.1
OfferingKey = tuple[str, str, str]


def vector(resources: Resources, dims: Sequence[str]) -> Vector:
    return tuple(resources.get(d) for d in dims)


def fits(used: Vector, capacity: Vector) -> bool:
    return all(u <= c + 1e-9 for u, c in zip(used, capacity, strict=True))


def gpu_kinds(resources: Resources) -> frozenset[str]:
    return frozenset(name for name in GPU_RESOURCES if resources.get(name) > 0)


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


@dataclass(frozen=True)
class CandidateSet:
    """Compatible types, cheapest first, and the Pareto frontier of their allocatable (for packing)."""

    candidates: tuple[Candidate, ...]
    frontier: tuple[Vector, ...]


def _pareto(vectors: list[Vector]) -> tuple[Vector, ...]:
    kept: list[Vector] = []
    for vec in sorted(set(vectors), key=lambda v: tuple(-x for x in v)):
        if not any(fits(vec, other) for other in kept):
            kept.append(vec)
    return tuple(kept)


def _daemon_fits_type(
    daemon: Pod, instance_type: InstanceType, base: Requirements, keys: frozenset[str]
) -> bool:
    labels = instance_type.labels()
    for term in pod_terms(daemon):
        reqs = base.intersect(term)
        if all(reqs.allows(k, v) for k, v in labels.items()) and reqs.conflict(keys) is None:
            return True
    return False


@dataclass
class ProvisionerView:
    provisioner: Provisioner
    requirements: Requirements
    keys: frozenset[str]
    entries: list[Entry]
    excluded: list[str]

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
        entries, excluded = [], []
        for instance_type in instance_types:
            if provisioner.kubelet.max_pods:
                instance_type = instance_type.with_max_pods(provisioner.kubelet.max_pods)
            if reason := instance_type.fits_overhead():
                excluded.append(f"Excluding instance type {instance_type.name}: {reason}")
                continue
            landing = [d for d in daemons if _daemon_fits_type(d, instance_type, reqs, keys)]
            overhead = Resources({"pods": len(landing)})
            for daemon in landing:
                overhead = overhead + daemon.requests
            alloc = instance_type.allocatable - overhead
            if not overhead.fits_in(instance_type.allocatable):
                excluded.append(
                    f"Excluding instance type {instance_type.name}: not enough resources for daemons"
                    f" (provisioner {provisioner.name})"
                )
                continue
            entries.append(Entry(instance_type, vector(alloc, dims), len(landing)))
        return cls(provisioner, reqs, keys, entries, excluded)


class CandidateCache:
    def __init__(self, unavailable: Collection[OfferingKey]) -> None:
        self.unavailable = frozenset(unavailable)
        self._memo: dict[tuple[str, Requirements, frozenset[str]], CandidateSet] = {}

    def cheapest_offering(self, instance_type: InstanceType, reqs: Requirements) -> Offering | None:
        zones, capacity_types = reqs.get(wk.ZONE), reqs.get(wk.CAPACITY_TYPE)
        best = None
        for offering in instance_type.offerings:
            if (
                not offering.available
                or (instance_type.name, offering.zone, offering.capacity_type) in self.unavailable
            ):
                continue
            if zones.contains(offering.zone) and capacity_types.contains(offering.capacity_type):
                if best is None or offering.price < best.price:
                    best = offering
        return best

    def lookup(self, view: ProvisionerView, reqs: Requirements, gpus: frozenset[str]) -> CandidateSet:
        key = (view.provisioner.name, reqs, gpus)
        if (found := self._memo.get(key)) is not None:
            return found
        names, arches, oses = reqs.get(wk.INSTANCE_TYPE), reqs.get(wk.ARCH), reqs.get(wk.OS)
        candidates = []
        for entry in view.entries:
            instance_type = entry.type
            # GPU types only serve GPU pods, and a GPU pod needs every kind of device it asks for.
            type_gpus = gpus_of(instance_type)
            if (gpus and not gpus <= type_gpus) or (not gpus and type_gpus):
                continue
            if not (
                names.contains(instance_type.name)
                and arches.contains(instance_type.arch)
                and oses.contains(instance_type.os)
            ):
                continue
            offering = self.cheapest_offering(instance_type, reqs)
            if offering is not None:
                candidates.append(Candidate(entry, offering))
        candidates.sort(key=lambda c: (c.offering.price, c.entry.type.name))
        found = CandidateSet(
            tuple(candidates), _pareto([c.entry.alloc for c in _efficient(candidates, gpus)])
        )
        self._memo[key] = found
        return found


def _efficient(candidates: list[Candidate], gpus: frozenset[str]) -> list[Candidate]:
    """Types a node may grow into: priced within GROWTH_SLACK of the cheapest fractional cover of their own size.

    Without this a node keeps growing into whatever type is largest (a 448-vCPU, 6 TiB machine) and the
    cheapest type holding its final contents can cost several times the resources it provides.
    """
    if gpus:
        per_gpu = [c.offering.price / sum(c.entry.type.gpus.get(g) for g in gpus) for c in candidates]
        best = min(per_gpu, default=0.0)
        return [c for c, p in zip(candidates, per_gpu, strict=True) if p <= best * (1 + GROWTH_SLACK)]
    vertices = lowerbound.dual_vertices(
        [
            (c.entry.alloc[:2], c.offering.price)
            for c in candidates
            if c.entry.alloc[0] > 0 and c.entry.alloc[1] > 0
        ]
    )
    return [
        c
        for c in candidates
        if c.offering.price <= (1 + GROWTH_SLACK) * lowerbound.dual_cost(vertices, c.entry.alloc[:2])
    ]


def gpus_of(instance_type: InstanceType) -> frozenset[str]:
    return gpu_kinds(instance_type.gpus)
