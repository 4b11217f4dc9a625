"""Pods kube-scheduler binds: the room karpy keeps for them on the node planned for them.

A pod with rules karpy leaves to kube-scheduler (`Pod.deferred`: claims its VolumeBinding binds or
provisions on the chosen node, dynamic resource allocation, matchFields) is planned like any other,
but karpy does not bind it. Its room is held on its node in ClusterState instead (Karpenter's
"nominated" pods), and the pod's `status.nominatedNodeName` names that node: kube-scheduler's
nominator then keeps other pods of lower or equal priority off that room and tries the node first
for the pod, without calling karpy's extender. kube-scheduler clears the field after an attempt that
fails without a preemption candidate (the node still starting, say), so it is set again whenever
the pending-pod watch shows it missing while the hold lasts. The next batches plan around the
room and do not launch for the pod again; the extender's guard still keeps pods it is called for
(those requesting `karpy.sh/guarded`) off it.

A hold ends when the pod is bound (anywhere: the bound-pod index sees it) or deleted, or at its
deadline (`Settings.scheduler_bind_deadline_seconds`), which leaves an Event and clears the
nomination; the node then goes through the normal emptiness and consolidation paths.

Thread-safe: ClusterState guards the holds; binds nominate from the launch pool, the watches
release, the provisioning loop expires.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from extender.api.pod import Pod
from extender.cluster import pods as kube_pods
from extender.cluster.errors import ClusterError
from extender.cluster.objects import pod_key
from extender.provisioning.report import Reporter
from extender.state import ClusterState

log = logging.getLogger("karpy.controller.provisioning")

#: Event reasons on pods (README, "Events").
NOMINATED_REASON = "Nominated"
NOT_BOUND_REASON = "NotBoundByScheduler"


class Nominations:
    def __init__(
        self,
        *,
        kube: Any,
        state: ClusterState,
        reporter: Reporter,
        clock: Callable[[], float],
        deadline_seconds: float,
    ) -> None:
        self.kube = kube
        self.state = state
        self.reporter = reporter
        self.clock = clock
        self.deadline_seconds = deadline_seconds

    def nominate(self, node: str, pods: Sequence[Pod], *, launched: bool, waiting_for: str = "") -> None:
        """Hold `node`'s room for `pods` (each with deferred rules, or `waiting_for` what the node
        must lose first: its startup taints) and say so on each pod."""
        if not pods:
            return
        self.state.hold(node, pods, self.clock() + self.deadline_seconds)
        log.info(
            "Nominated %d pod(s) to node %s for kube-scheduler to bind, holding their room for %gs",
            len(pods),
            node,
            self.deadline_seconds,
        )
        why = ", launched for it" if launched else ""
        for pod in pods:
            self._nominate(pod.namespace, pod.name, node)
            self.reporter.pod_event(
                pod,
                NOMINATED_REASON,
                f"Pod should schedule on node {node}{why}; kube-scheduler binds it "
                + (
                    f"once the node has no {waiting_for}"
                    if waiting_for
                    else f"(karpy does not evaluate {'; '.join(pod.deferred)})"
                ),
                warning=False,
            )

    def _nominate(self, namespace: str, name: str, node: str | None) -> None:
        """A failed write is not fatal: the hold stands, and the watch sets it again."""
        try:
            kube_pods.nominate(self.kube, namespace, name, node)
        except ClusterError as err:
            doing = f"nominating node {node} for" if node else "clearing the nomination of"
            log.warning("Failed %s pod %s/%s, %s", doing, namespace, name, err)

    def seen(self, manifest: Mapping[str, Any]) -> None:
        """Pending-pod watch listener: a held pod whose nomination kube-scheduler cleared (a failed
        attempt) or never saw is nominated again."""
        key = pod_key(manifest)
        hold = self.state.held(key)
        if hold is None:
            return
        spec, status = manifest.get("spec") or {}, manifest.get("status") or {}
        if spec.get("nodeName") or status.get("nominatedNodeName") == hold.node:
            return
        log.debug("Nominating node %s for pod %s again", hold.node, key)
        self._nominate(hold.pod.namespace, hold.pod.name, hold.node)

    def held_on(self, node: str) -> list[Pod]:
        return [hold.pod for hold in self.state.holds() if hold.node == node]

    def bound(self, kind: str, pod: Pod) -> None:
        """Bound-pod index listener: any event of a pod there means it was bound (or, DELETED,
        that it finished): its hold, if any, ends."""
        if self.state.held(pod.key) is None:
            return
        hold = self.state.unhold(pod.key)
        if hold is not None:
            node = pod.node_name or "?"
            log.info(
                "Released the room held on node %s for pod %s, bound to node %s", hold.node, pod.key, node
            )

    def gone(self, key: str) -> None:
        """A pending pod left the pending set (deleted, or bound: the index releases that too)."""
        if self.state.held(key) is not None and (hold := self.state.unhold(key)) is not None:
            log.info("Released the room held on node %s for pod %s, no longer pending", hold.node, key)

    def release_on_missing(self, nodes: frozenset[str]) -> None:
        """Holds on nodes that no longer exist end now: their pods need capacity again."""
        for hold in self.state.holds():
            if hold.node not in nodes and self.state.unhold(hold.pod.key) is not None:
                log.info("Released the room held for pod %s, node %s is gone", hold.pod.key, hold.node)
                self._nominate(hold.pod.namespace, hold.pod.name, None)

    def expire(self) -> list[str]:
        """End the holds whose deadline passed, with an Event on each pod; their pod keys."""
        expired = self.state.expire(self.clock())
        for hold in expired:
            waited = f"kube-scheduler did not bind the pod within {self.deadline_seconds:g}s"
            message = f"{waited}, released the room reserved on node {hold.node}"
            log.info("Released the room held on node %s for pod %s, %s", hold.node, hold.pod.key, waited)
            self.reporter.pod_event(hold.pod, NOT_BOUND_REASON, message)
            self._nominate(hold.pod.namespace, hold.pod.name, None)
        return [hold.pod.key for hold in expired]

    def next_in(self) -> float | None:
        """Seconds until the next deadline; None when nothing is held."""
        due = self.state.next_expiry()
        return None if due is None else max(due - self.clock(), 0.0)
