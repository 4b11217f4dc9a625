"""Pod and Provisioner -> Requirements: the label constraints a node must meet.

A pod's hard constraints are its nodeSelector ANDed with one required node-affinity term (terms
are ORed, tried in order); preferred terms are soft and relaxed by the solver, lightest first.
A Provisioner contributes its requirements, its labels (as single-value In) and its own name.
"""

from __future__ import annotations

from extender.api import labels as wk
from extender.api.pod import Pod
from extender.api.provisioner import Provisioner, Requirement
from extender.scheduling.requirements import Requirements

#: key -> the fewest distinct values a node's instance types give it (minvalues.py), sorted by
#: key; () when no requirement has minValues.
MinValues = tuple[tuple[str, int], ...]


def provisioner_requirements(provisioner: Provisioner) -> Requirements:
    labels = {**provisioner.labels, provisioner.owner_label: provisioner.name}
    return Requirements.from_requirements(provisioner.requirements).intersect(
        Requirements.from_labels(labels)
    )


def min_values(provisioner: Provisioner) -> MinValues:
    """Each key's largest minValues (Karpenter's Requirement.Intersection keeps the max)."""
    most: dict[str, int] = {}
    for req in provisioner.requirements:
        if req.min_values is not None:
            key = wk.normalize_key(req.key)
            most[key] = max(most.get(key, 0), req.min_values)
    return tuple(sorted(most.items()))


def defined_keys(provisioner: Provisioner) -> frozenset[str]:
    """Label keys a node of this Provisioner carries (besides the well-known ones)."""
    keys = {wk.normalize_key(k) for k in provisioner.labels} | {provisioner.owner_label}
    keys |= {wk.normalize_key(r.key) for r in provisioner.requirements if r.operator == "In"}
    return frozenset(keys)


def affinity_terms(pod: Pod) -> list[Requirements]:
    """nodeSelector AND each ORed required node-affinity term (at least one), in the pod's order.

    What topology spread's nodeAffinityPolicy honours: the pod's own node affinity, not its volumes.
    """
    selector = Requirements.from_labels(pod.node_selector)
    terms = pod.required_terms or ((),)
    return [selector.intersect(Requirements.from_requirements(term)) for term in terms]


def pod_terms(pod: Pod) -> list[Requirements]:
    """Where the pod may run: its node affinity AND its volumes' node terms (ORed terms multiply)."""
    terms = affinity_terms(pod)
    if not pod.volume_terms:
        return terms
    volumes = [Requirements.from_requirements(v) for v in pod.volume_terms]
    return [t.intersect(v) for t in terms for v in volumes]


def preferences(pod: Pod) -> list[tuple[int, Requirements, tuple[Requirement, ...]]]:
    """Preferred node-affinity terms, heaviest first (the solver drops them from the end)."""
    ordered = sorted(pod.preferred_terms, key=lambda t: -t.weight)
    return [(t.weight, Requirements.from_requirements(t.requirements), t.requirements) for t in ordered]


def describe_taint(taint: object) -> str:
    key, value, effect = (getattr(taint, a) for a in ("key", "value", "effect"))
    return f"{key}={value}:{effect}" if value else f"{key}:{effect}"
