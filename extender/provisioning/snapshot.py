"""The batch's picture of the cluster for the re-check right before each bind.

The solver planned against the cluster as it was when the batch began; by the time a group of
pods is bound to its node, kube-scheduler may have placed other pods (on that node or anywhere),
and the node itself may have changed. Each pod is therefore checked with kube-scheduler's Filter
semantics (`extender.scheduling.admission.check`) against the live node (read again, with the pods
bound to it now) and the rest of the cluster.

The rest of the cluster is the batch's inventory with the batch's own placements: every pod of
the plan sits on the node the plan gave it as soon as that node is known (existing nodes from the
start, new ones once checked; a pod of a later bind phase only once checked, as it binds after the
pods it may crowd), and leaves it when its check or its bind fails. Within the group
being checked, pods are taken in order, each against those admitted before it. Checking against
only the binds made so far would refuse sound plans by the order of the binds: with zone spread,
the second pod bound into a zone whose sibling zone's node is created but not yet bound to would
see a skew of 2. With every other node at its planned end state and the checked node filling up
one pod at a time, a plan the solver found consistent passes in any order of groups.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Mapping, Sequence

from extender.api.pod import Pod
from extender.api.resources import Resources
from extender.scheduling import admission, shared_claims
from extender.scheduling.plan import ExistingNode

log = logging.getLogger("karpy.controller.provisioning")


def with_pods(node: ExistingNode, pods: Sequence[Pod]) -> ExistingNode:
    """`node` with `pods` bound to it as well (those it already holds are not added twice)."""
    held = {p.key for p in node.pods}
    extra = [p for p in pods if p.key not in held]
    if not extra:
        return node
    added = Resources()
    for pod in extra:
        added = added + pod.requests
    return dataclasses.replace(
        node,
        pods=(*node.pods, *extra),
        requested=node.requested + added,
        pod_count=node.pod_count + len(extra),
        volumes_in_use=_attach(node, extra, +1),
    )


def _attach(node: ExistingNode, pods: Sequence[Pod], sign: int) -> tuple[tuple[str, int], ...]:
    """The node's volumes in use with the CSI claims of `pods` (joining: +1, leaving: -1) that no
    other pod on it holds: kube-scheduler's NodeVolumeLimits counts a node's unique volumes."""
    if not node.volume_limits or not any(p.csi_claims for p in pods):
        return node.volumes_in_use
    leaving = {p.key for p in pods} if sign < 0 else set()
    others = shared_claims.held(p for p in node.pods if p.key not in leaving)
    counts = dict(node.volumes_in_use)
    for pod in pods:
        for driver, name in pod.csi_claims:
            if (key := shared_claims.key(pod.namespace, name)) not in others:
                others.add(key)
                counts[driver] = max(counts.get(driver, 0) + sign, 0)
    return tuple(sorted(counts.items()))


def without_pod(node: ExistingNode, key: str) -> ExistingNode:
    """`node` without the pod `key` (unchanged if it does not hold it)."""
    pod = next((p for p in node.pods if p.key == key), None)
    if pod is None:
        return node
    return dataclasses.replace(
        node,
        pods=tuple(p for p in node.pods if p.key != key),
        requested=node.requested - pod.requests,
        pod_count=max(node.pod_count - 1, 0),
    )


class BindSnapshot:
    """Thread-safe: launch groups bind from a pool, each group re-checked under one lock."""

    def __init__(
        self,
        nodes: Sequence[ExistingNode],
        namespaces: Mapping[str, Mapping[str, str]] | None = None,
        planned: Mapping[str, Sequence[Pod]] | None = None,
    ) -> None:
        self._nodes = {n.name: n for n in nodes}
        #: CSINode figures as the batch read them: the node read again before binding has none.
        self._volumes = {n.name: n for n in nodes if n.volume_limits}
        #: claim key -> CSI driver, for the claims of the batch's pods and of the pods bound before.
        self._drivers = {
            shared_claims.key(p.namespace, name): driver
            for p in (
                *(p for n in self._volumes.values() for p in n.pods),
                *(p for g in (planned or {}).values() for p in g),
            )
            for driver, name in p.csi_claims
        }
        self._namespaces = namespaces
        #: Nodes holding a pod with required anti-affinity (their terms may exclude any pod).
        self._anti = {n.name for n in nodes if any(p.pod_anti_affinity for p in n.pods)}
        #: pod key -> node the batch placed it on in this picture.
        self._where: dict[str, str] = {}
        self._lock = threading.Lock()
        for name, pods in (planned or {}).items():
            if name in self._nodes:
                self._place(name, pods)

    def _place(self, name: str, pods: Sequence[Pod]) -> None:
        for pod in pods:
            elsewhere = self._where.get(pod.key)
            if elsewhere is not None and elsewhere != name and elsewhere in self._nodes:
                self._nodes[elsewhere] = without_pod(self._nodes[elsewhere], pod.key)
            self._where[pod.key] = name
            if pod.pod_anti_affinity:
                self._anti.add(name)
        self._nodes[name] = with_pods(self._nodes[name], pods)

    def _remove(self, name: str, key: str) -> None:
        if name in self._nodes:
            self._nodes[name] = without_pod(self._nodes[name], key)
        if self._where.get(key) == name:
            del self._where[key]

    def node(self, name: str) -> ExistingNode | None:
        return self._nodes.get(name)

    def admit(self, live: ExistingNode, pods: Sequence[Pod]) -> tuple[list[Pod], list[tuple[Pod, str]]]:
        """(pods that pass on `live`, [(pod, reason)] that do not); `live` is the node as read now
        with the pods bound to it now. Refused pods leave the picture."""
        admitted: list[Pod] = []
        refused: list[tuple[Pod, str]] = []
        with self._lock:
            # Pods of the batch kube-scheduler bound here meanwhile leave the nodes planned for them.
            for pod in live.pods:
                elsewhere = self._where.pop(pod.key, None)
                if elsewhere is not None and elsewhere != live.name and elsewhere in self._nodes:
                    self._nodes[elsewhere] = without_pod(self._nodes[elsewhere], pod.key)
            for pod in pods:
                if self._where.get(pod.key) == live.name:
                    del self._where[pod.key]
            live = self._with_volumes(live)
            self._nodes[live.name] = live
            if any(p.pod_anti_affinity for p in live.pods):
                self._anti.add(live.name)
            everywhere = list(self._nodes.values())
            index = next(i for i, n in enumerate(everywhere) if n.name == live.name)
            for pod in pods:
                node = without_pod(self._nodes[live.name], pod.key)
                if _looks_beyond_its_node(pod):
                    everywhere[index] = node
                    cluster = everywhere
                else:
                    # Only the anti-affinity of pods elsewhere can refuse it there (symmetry).
                    cluster = [node, *(self._nodes[n] for n in self._anti if n != live.name)]
                reason = self._check(pod, node, cluster)
                if reason is None:
                    admitted.append(pod)
                    self._place(live.name, [pod])
                else:
                    refused.append((pod, reason))
        return admitted, refused

    def _with_volumes(self, live: ExistingNode) -> ExistingNode:
        """`live` with the batch's CSINode limits, its volumes in use counted from the pods on it now
        (claims of a driver the batch knows), never fewer than the batch counted at its start."""
        read = self._volumes.get(live.name)
        if read is None or live.volume_limits:
            return live
        known: dict[str, set[str]] = {}
        for pod in live.pods:
            for name in pod.claims:
                key = shared_claims.key(pod.namespace, name)
                if (driver := self._drivers.get(key)) is not None:
                    known.setdefault(driver, set()).add(key)
        in_use = dict(read.volumes_in_use)
        for driver, keys in known.items():
            in_use[driver] = max(in_use.get(driver, 0), len(keys))
        return dataclasses.replace(
            live, volume_limits=read.volume_limits, volumes_in_use=tuple(sorted(in_use.items()))
        )

    def forget(self, name: str, pods: Sequence[Pod]) -> None:
        """Pods whose bind failed: they are not on `name` after all."""
        with self._lock:
            for pod in pods:
                self._remove(name, pod.key)

    def _check(self, pod: Pod, node: ExistingNode, cluster: Sequence[ExistingNode]) -> str | None:
        try:
            return admission.check(pod, node, cluster, self._namespaces)
        except Exception:  # a fault in the check must not stop binding what the solver planned
            log.exception("Re-checking pod %s on node %s failed, binding as planned", pod.key, node.name)
            return None


def _looks_beyond_its_node(pod: Pod) -> bool:
    """Whether kube-scheduler's Filter for `pod` reads other nodes than the one it goes to beyond
    their pods' anti-affinity: hard topology spread, or required pod (anti-)affinity of its own."""
    return bool(pod.pod_affinity or pod.pod_anti_affinity or any(c.hard for c in pod.topology_spread))
