"""`Shape`: everything about a pod that decides where it may go, built once per pod per solve.

Pods with equal shapes are interchangeable to the solver: they resolve to the same Provisioner and
requirements, take the same domains and pack alike. Every place that groups or memoises pods keys
them by a `Grouping` of the shape: the fields it may ignore, named, so a field added to `Shape` is
part of every key until a grouping says why it does not matter there (a new constraint can never
be missed by one of them).
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field, fields
from typing import cast

from extender.api.affinity import HostPort, PodAffinityTerm, TopologySpread, WeightedPodAffinityTerm
from extender.api.pod import Pod, PreferredTerm, RequiredTerms, Toleration


@dataclass(frozen=True, eq=False)
class Shape:
    namespace: str
    labels: tuple[tuple[str, str], ...]
    requests: tuple[tuple[str, float], ...]
    node_selector: tuple[tuple[str, str], ...]
    required_terms: RequiredTerms
    preferred_terms: tuple[PreferredTerm, ...]
    tolerations: tuple[Toleration, ...]
    topology_spread: tuple[TopologySpread, ...]
    pod_affinity: tuple[PodAffinityTerm, ...]
    pod_anti_affinity: tuple[PodAffinityTerm, ...]
    preferred_pod_affinity: tuple[WeightedPodAffinityTerm, ...]
    preferred_pod_anti_affinity: tuple[WeightedPodAffinityTerm, ...]
    host_ports: tuple[HostPort, ...]
    volume_terms: RequiredTerms
    csi_volumes: tuple[tuple[str, int], ...]
    #: Grouping -> key, so each key is built and hashed once per shape.
    _keys: dict[frozenset[str], ShapeKey] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(cls, pod: Pod) -> Shape:
        return cls(
            namespace=pod.namespace,
            labels=tuple(sorted(pod.labels.items())),
            requests=tuple(sorted(pod.requests.amounts.items())),
            node_selector=tuple(sorted(pod.node_selector.items())),
            required_terms=pod.required_terms,
            preferred_terms=pod.preferred_terms,
            tolerations=pod.tolerations,
            topology_spread=pod.topology_spread,
            pod_affinity=pod.pod_affinity,
            pod_anti_affinity=pod.pod_anti_affinity,
            preferred_pod_affinity=pod.preferred_pod_affinity,
            preferred_pod_anti_affinity=pod.preferred_pod_anti_affinity,
            host_ports=pod.host_ports,
            volume_terms=pod.volume_terms,
            csi_volumes=pod.csi_volumes,
        )

    def key(self, grouping: frozenset[str] = frozenset()) -> ShapeKey:
        """The shape's fields but those `grouping` ignores: equal keys group pods together."""
        if (found := self._keys.get(grouping)) is None:
            fields_of = (FIELDS, grouping)
            if (kept := _KEPT.get(fields_of)) is None:
                kept = _KEPT[fields_of] = _kept(grouping)
            found = self._keys[grouping] = ShapeKey(kept(self))
        return found


#: The fields that make up a shape, in order (the memo is not one).
FIELDS = tuple(f.name for f in fields(Shape) if not f.name.startswith("_"))


def _kept(grouping: frozenset[str]) -> Callable[[Shape], tuple[Hashable, ...]]:
    """The fields `grouping` keeps, read in one C call: every round builds a few keys per new shape
    (a 1-pod round's fixed cost), and a getattr per field in a generator was half of it."""
    names = [name for name in FIELDS if name not in grouping]
    if len(names) < 2:  # attrgetter of one name gives the value, not a 1-tuple
        getters = [operator.attrgetter(name) for name in names]
        return lambda shape: tuple(get(shape) for get in getters)
    return cast(Callable[[Shape], tuple[Hashable, ...]], operator.attrgetter(*names))


#: (FIELDS, grouping) -> `_kept(grouping)`: a handful of module constants. FIELDS is part of the key
#: so a field added to the shape (test_shape does it at run time) is read by every grouping.
_KEPT: dict[tuple[tuple[str, ...], frozenset[str]], Callable[[Shape], tuple[Hashable, ...]]] = {}


class ShapeKey:
    """A tuple of shape fields whose hash is computed once (the fields are deep tuples)."""

    __slots__ = ("_hash", "values")

    def __init__(self, values: tuple[Hashable, ...]) -> None:
        self.values = values
        self._hash = hash(values)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return self is other or (
            isinstance(other, ShapeKey) and self._hash == other._hash and self.values == other.values
        )

    def __repr__(self) -> str:
        return f"ShapeKey{self.values!r}"


def _grouping(*names: str) -> frozenset[str]:
    unknown = set(names) - set(FIELDS)
    assert not unknown, f"not a Shape field: {sorted(unknown)}"
    return frozenset(names)


# Field families, for groupings to name what they leave out.
#: What other pods' selectors see of a pod; not where the pod itself may go.
IDENTITY = _grouping("namespace", "labels")
#: Rules counted against other pods (InterPodAffinity, PodTopologySpread, NodePorts).
INTER_POD = _grouping(
    "topology_spread",
    "pod_affinity",
    "pod_anti_affinity",
    "preferred_pod_affinity",
    "preferred_pod_anti_affinity",
    "host_ports",
)
NODE_AFFINITY = _grouping("node_selector", "required_terms")
PREFERENCES = _grouping("preferred_terms")
#: What the pod takes of a node: resources, and attachments of its CSI volumes.
REQUESTS = _grouping("requests", "csi_volumes")
VOLUMES = _grouping("volume_terms")
TOLERATIONS = _grouping("tolerations")

#: A class of the packer: labels matter only through the hostname terms they match, which the
#: class key holds beside this.
CLASS = _grouping("labels")
#: Hostname rules as term ids (topology.HostConstraints.of): the inter-pod rules and the namespace
#: (the terms' namespaces default to the pod's), not where the pod may go nor what it takes.
HOST_RULES = _grouping("labels") | NODE_AFFINITY | PREFERENCES | REQUESTS | VOLUMES | TOLERATIONS
#: The domain planner's "pods alike land alike": which nodes' labels and taints admit the pod.
PLACEMENT = IDENTITY | INTER_POD | PREFERENCES | REQUESTS
#: What the Resolver's answer depends on: where the pod may go and what it takes, not who it is
#: nor whom it counts (the pod's key appears only in a note, added per pod).
RESOLUTION = IDENTITY | INTER_POD
#: Every grouping in use, by name (a test adds a field and checks each sees it).
GROUPINGS = {"class": CLASS, "host rules": HOST_RULES, "placement": PLACEMENT, "resolution": RESOLUTION}


@functools.cache
def domains_grouping(*, affinity: bool, fit: bool, taints: bool) -> frozenset[str]:
    """What the domains a new node could take for a pod depend on (Resolver.domains): the node
    affinity when honoured, volumes and requests when the pod must fit, tolerations when honoured."""
    ignored = IDENTITY | INTER_POD | PREFERENCES
    if not affinity:
        ignored |= NODE_AFFINITY
    if not fit:
        ignored |= VOLUMES | REQUESTS
    if not taints:
        ignored |= TOLERATIONS
    return ignored


GROUPINGS.update(
    {
        f"domains(affinity={a}, fit={f}, taints={t})": domains_grouping(affinity=a, fit=f, taints=t)
        for a in (False, True)
        for f in (False, True)
        for t in (False, True)
    }
)


class Shapes:
    """Each pod's shape, built on first use and kept for the solve (pod keys are unique in it);
    pods of one shape (replicas) share one value, so its keys are built once for them all."""

    def __init__(self) -> None:
        self._by_pod: dict[str, Shape] = {}
        self._interned: dict[ShapeKey, Shape] = {}

    def __call__(self, pod: Pod) -> Shape:
        if (found := self._by_pod.get(pod.key)) is None:
            shape = Shape.of(pod)
            found = self._by_pod[pod.key] = self._interned.setdefault(shape.key(), shape)
        return found
