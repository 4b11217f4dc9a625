"""Claims pods share, counted once per node.

kube-scheduler's NodeVolumeLimits counts the unique volumes of each CSI driver on a node
(`nodevolumelimits/csi.go` keys them by driver and volume handle): pods that share a claim take one
attachment where they meet. The packer counts a pod's own claims (no other pod of the batch or on a
node karpy packs onto uses them) as one more dimension per driver, added up like cpu; a shared claim
is charged to a node once, by the first pod that brings it (`PodClass.shared`, `Node.claims`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

from extender.api.pod import Pod
from extender.scheduling import attach
from extender.scheduling.candidates import Vector
from extender.scheduling.plan import ExistingNode

#: (dimension index, claim key) of each shared claim of a pod.
Shared = tuple[tuple[int, str], ...]


def key(namespace: str, claim: str) -> str:
    return f"{namespace}/{claim}"


def held(pods: Iterable[Pod]) -> set[str]:
    """The claim keys the pods hold (every claim: one of a CSI driver has the same key anywhere)."""
    return {key(pod.namespace, name) for pod in pods for name in pod.claims}


def shared(pods: Sequence[Pod], existing: Sequence[ExistingNode]) -> frozenset[str]:
    """Keys of the CSI claims more than one pending pod uses, or a pod on a node karpy packs onto."""
    seen: set[str] = set()
    result: set[str] = set()
    for pod in pods:
        for _, name in pod.csi_claims:
            claim = key(pod.namespace, name)
            (result if claim in seen else seen).add(claim)
    if seen - result:
        result |= seen & held(p for node in existing if node.schedulable for p in node.pods)
    return frozenset(result)


def of(pod: Pod, shared_keys: Collection[str], dims: Sequence[str]) -> Shared:
    """The pod's shared claims, each with the index of its driver's volume dimension."""
    return tuple(
        (dims.index(attach.dimension(driver)), claim)
        for driver, name in pod.csi_claims
        if (claim := key(pod.namespace, name)) in shared_keys
    )


def new_on(claims: Collection[str], shared_claims: Shared) -> list[int]:
    """The dimension indexes charged when pods with `shared_claims` join a node holding `claims`."""
    return [index for index, claim in shared_claims if claim not in claims]


def shift(vector: Vector, indexes: Iterable[int], by: float) -> Vector:
    """`vector` with `by` added at each of `indexes` (once per occurrence)."""
    values = list(vector)
    for index in indexes:
        values[index] += by
    return tuple(values)
