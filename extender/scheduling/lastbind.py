"""The plan's nodes as the cluster a pod binding after every planned pod would see.

A pod the rounds leave out for its Provisioner's limits or for its hostname rules had its topology
domain chosen before packing found that the domain needs a node the limits forbid, or has no node
its hostname rules accept. kube-scheduler, binding it after the plan's pods, may still find a
planned or existing node elsewhere that passes every filter. The solver tries such pods once more
on the plan's nodes only (no new node), seen here as existing nodes holding the planned pods, so
the domain planner and packer count those pods as kube-scheduler would.

A planned node is launched as one of its options in one of its zones and capacity types (a
"world"); it carries only the labels every world gives it. A pod whose rules read a label some
world sets otherwise is kept off that node (a hostname `NotIn` requirement), and is not tried at
all where such a node holds a pod its rules count or a pod whose anti-affinity repels it: who
counts where would depend on the world.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from extender.api import labels as wk
from extender.api.pod import Pod
from extender.api.resources import PODS, Resources
from extender.scheduling import attach
from extender.scheduling.candidates import ProvisionerView
from extender.scheduling.constraints import pod_terms
from extender.scheduling.domains import ANTI, rules_of
from extender.scheduling.plan import ExistingNode, PlannedNode
from extender.scheduling.requirements import Requirements, ValueSet
from extender.scheduling.topology import NamespaceLabels


def with_pods(node: ExistingNode, pods: Sequence[Pod], dims: Sequence[str]) -> ExistingNode:
    """The node with `pods` bound to it as well."""
    if not pods:
        return node
    requested = node.requested
    volumes = dict(node.volumes_in_use)
    for pod in pods:
        requested = requested + pod.requests
        for driver, count in pod.csi_volumes:
            volumes[driver] = volumes.get(driver, 0) + count
    return ExistingNode(
        name=node.name,
        provisioner=node.provisioner,
        instance_type=node.instance_type,
        labels=node.labels,
        taints=node.taints,
        allocatable=node.allocatable,
        requested=requested,
        pod_count=node.pod_count + len(pods),
        pods=(*node.pods, *pods),
        schedulable=node.schedulable,
        volume_limits=node.volume_limits,
        volumes_in_use=tuple(sorted(volumes.items())),
    )


def as_existing(index: int, node: PlannedNode, view: ProvisionerView, dims: Sequence[str]) -> ExistingNode:
    """The planned node as a node already there: the room every option has, the labels every world
    gives it."""
    alloc = {e.type.name: e.alloc for e in view.entries}
    least = [min(alloc[t.name][i] for t in node.options) for i in range(len(dims))]
    used = [node.requests.get(d) for d in dims]
    # A name no node of the cluster can have (a space is not valid in a node name).
    name = f"planned {index}"
    return ExistingNode(
        name=name,
        provisioner=node.provisioner,
        instance_type=node.options[0].name,
        labels={**certain_labels(node), wk.HOSTNAME: name},
        taints=node.taints,
        allocatable=Resources({d: least[i] for i, d in enumerate(dims) if not attach.driver_of(d)}),
        requested=Resources(
            {d: used[i] for i, d in enumerate(dims) if d != PODS and not attach.driver_of(d)}
        ),
        pod_count=round(node.requests.get(PODS)),
        pods=node.pods,
        volume_limits=tuple(
            (driver, int(least[i])) for i, d in enumerate(dims) if (driver := attach.driver_of(d))
        ),
        volumes_in_use=tuple(
            (driver, round(used[i])) for i, d in enumerate(dims) if (driver := attach.driver_of(d))
        ),
    )


def _worlds(node: PlannedNode) -> Iterable[dict[str, str]]:
    for option in node.options:
        for offering in option.offerings:
            if offering.zone in node.zones and offering.capacity_type in node.capacity_types:
                yield {
                    **option.labels(),
                    wk.ZONE: offering.zone,
                    wk.CAPACITY_TYPE: offering.capacity_type,
                }


def certain_labels(node: PlannedNode) -> dict[str, str]:
    """The labels the node carries in every world."""
    worlds = list(_worlds(node)) or [{}]
    common = {k: v for k, v in worlds[0].items() if all(w.get(k) == v for w in worlds[1:])}
    return {**common, **node.labels}


def uncertain_keys(node: PlannedNode) -> frozenset[str]:
    """Label keys (GA and deprecated) whose value depends on the world the node is launched in."""
    certain = certain_labels(node)
    keys = {k for w in _worlds(node) for k in w if k not in certain}
    return frozenset(keys | {old for old, ga in wk.DEPRECATED_LABELS.items() if ga in keys})


def read_keys(pod: Pod, namespaces: NamespaceLabels | None) -> frozenset[str]:
    """Node label keys the pod's node affinity and required topology rules read."""
    keys = {r.key for r in rules_of(pod, namespaces) if r.hard}
    for term in pod_terms(pod):
        keys |= set(term.keys())
    return frozenset(keys | {wk.normalize_key(k) for k in keys})


def world_free(
    pod: Pod,
    nodes: Sequence[tuple[ExistingNode, frozenset[str]]],
    namespaces: NamespaceLabels | None,
) -> bool:
    """Whether no planned node whose `uncertain` keys the pod's rules read holds a pod those rules
    count, or one whose required anti-affinity repels the pod."""
    rules = [r for r in rules_of(pod, namespaces) if r.hard]
    read = read_keys(pod, namespaces)
    for node, uncertain in nodes:
        if any(_repels(other, pod, uncertain, namespaces) for other in node.pods):
            return False
        if uncertain & read and any(r.term.selects(other) for r in rules for other in node.pods):
            return False
    return True


def avoid(
    pod: Pod,
    nodes: Sequence[tuple[ExistingNode, frozenset[str]]],
    namespaces: NamespaceLabels | None,
) -> Requirements:
    """Keeps the pod off the planned nodes whose `uncertain` keys its rules read."""
    read = read_keys(pod, namespaces)
    names = frozenset(node.name for node, uncertain in nodes if uncertain & read)
    if not names:
        return Requirements()
    return Requirements.of({wk.HOSTNAME: ValueSet(True, names, allow_absent=True)})


def _repels(other: Pod, pod: Pod, uncertain: frozenset[str], namespaces: NamespaceLabels | None) -> bool:
    if not other.pod_anti_affinity:
        return False
    return any(
        r.kind == ANTI and r.hard and r.key in uncertain and r.term.selects(pod)
        for r in rules_of(other, namespaces)
    )
