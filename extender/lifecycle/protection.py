"""`karpenter.sh/do-not-disrupt`: what keeps a node from voluntary disruption.

On a node, or on a pod that must move if the node goes (DaemonSet and static pods never move), the
annotation set to "true" keeps the node from emptiness, consolidation and drift (Karpenter v1,
pkg/utils/pod/scheduling.go `IsDoNotDisruptActive`, docs concepts/disruption "Pod-Level Controls"
and "Node-Level Controls"). v1alpha5's `karpenter.sh/do-not-evict` on a pod counts the same, so a
v1alpha5 node is protected either way. Expiry is forceful in v1 and ignores both; the drain still
waits for such pods until the node's terminationGracePeriod (termination.py). Karpenter 1.12's
duration values ("5m": protected until the pod has run that long) are not read: only "true" counts,
as in v1.0.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from extender.api.disruption import DO_NOT_DISRUPT
from extender.api.pod import Pod


def pod_blocker(pod: Pod) -> str | None:
    """Why this pod keeps its node (an annotation), or None."""
    if pod.annotations.get(DO_NOT_DISRUPT) == "true":
        return f"pod {pod.key} has {DO_NOT_DISRUPT} annotation"
    if pod.do_not_evict:
        return f"pod {pod.key} has do-not-evict annotation"
    return None


def protected(pod: Pod) -> bool:
    return pod_blocker(pod) is not None


def node_blocker(annotations: Mapping[str, str], pods: Iterable[Pod]) -> str | None:
    """Why a node with these annotations and pods may not be voluntarily disrupted, or None."""
    if annotations.get(DO_NOT_DISRUPT) == "true":
        return f"node has {DO_NOT_DISRUPT} annotation"
    for pod in pods:
        if not pod.node_bound and not pod.is_terminal and (reason := pod_blocker(pod)) is not None:
            return reason
    return None
