"""Bind: re-check each pod against its node as it is now, then bind the admitted ones in parallel.

The solver planned against the cluster as it was when the batch began; kube-scheduler may have
placed pods since, so each pod passes kube-scheduler's Filter (`BindSnapshot.admit`) on the live
node first. Capacity is reserved in ClusterState while the binds are in flight, so the extender's
guard keeps the pods kube-scheduler sends it out of the same room (in the shipped scheduler config,
those requesting karpy.sh/guarded; a new node's not-ready taint keeps every other pod off it until
the batch is done: docs/scheduler-path.md). A pod is never lost: a failed bind goes back
through the batching window, a refused pod too (refused twice within REFUSED_TTL_SECONDS it is
parked instead). 409 on bind counts as bound: someone placed the pod, which is all that matters.

Pods with rules karpy leaves to kube-scheduler (`Pod.deferred`) are not bound: their room is held
on the node for kube-scheduler to bind them (extender/provisioning/nominate.py), and the re-check
of the others counts that room as taken. So are pods that do not tolerate a NodePool startup taint
the node still carries: that taint orders the node's start-up (a CNI agent first), and kubelet
refuses a pod that does not tolerate a NoExecute one; kube-scheduler binds them once it is gone,
as with Karpenter, which plans past startup taints but never binds.

Pods bind in the plan's bind phases (`Plan.bind_phases`): `by_phase` splits a node's pods, and
`Held` carries the binds of later phases, which the pipeline makes after every earlier one.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from cachetools import TTLCache
from kubernetes import client

from extender.api.pod import Pod
from extender.api.provisioner import Taint
from extender.cluster import bind as kube_bind
from extender.cluster import inventory
from extender.cluster import nodes as kube_nodes
from extender.cluster import pods as kube_pods
from extender.cluster.errors import ClusterError
from extender.provisioning import metrics
from extender.provisioning.nominate import Nominations
from extender.provisioning.pools import Pools
from extender.provisioning.report import NOT_BINDING_REASON, BatchReport, Reporter
from extender.provisioning.snapshot import BindSnapshot
from extender.scheduling.constraints import describe_taint
from extender.state import ClusterState

log = logging.getLogger("karpy.controller.provisioning")

#: A pod the re-check refused twice within this long waits for the parked retry, not the next batch;
#: its refusals also change the launch id of the next node planned for it (launcher.launch_id).
REFUSED_TTL_SECONDS = 300.0


def by_phase(pods: Sequence[Pod], phases: Mapping[str, int]) -> dict[int, list[Pod]]:
    """The pods per bind phase (phase 0 always present, maybe empty)."""
    result: dict[int, list[Pod]] = {0: []}
    for pod in pods:
        result.setdefault(phases.get(pod.key, 0), []).append(pod)
    return result


@dataclass(frozen=True)
class Held:
    """Pods of one node held for a later bind phase."""

    phase: int
    node: str
    pods: tuple[Pod, ...]
    provisioner: str

    @classmethod
    def split(cls, node: str, pods: Sequence[Pod], provisioner: str, phases: Mapping[str, int]) -> list[Held]:
        """The binds of `pods` to `node` after the first phase."""
        return [
            cls(phase, node, tuple(group), provisioner)
            for phase, group in sorted(by_phase(pods, phases).items())
            if phase and group
        ]


class Binder:
    """Owner of the refusal counts: launch groups bind from the launch pool, so `_refused` is
    guarded by `_lock`."""

    def __init__(
        self,
        *,
        kube: client.ApiClient,
        state: ClusterState,
        pools: Pools,
        reporter: Reporter,
        clock: Callable[[], float],
        requeue: Callable[[Iterable[str]], object],
        park: Callable[[Iterable[str]], None],
        assume: Callable[[Pod, str], None] = lambda _pod, _node: None,
        nominations: Nominations,
    ) -> None:
        self.kube = kube
        self.state = state
        self.pools = pools
        self.reporter = reporter
        self.clock = clock
        self.requeue = requeue
        self.park = park
        #: Told of every bind, so the bound-pod index counts the pod before its watch event arrives.
        self.assume = assume
        #: Holds the room of the pods kube-scheduler binds.
        self.nominations = nominations
        #: pod key -> times the re-check before binding refused it.
        self._refused: TTLCache[str, int] = TTLCache(maxsize=10_000, ttl=REFUSED_TTL_SECONDS, timer=clock)
        self._lock = threading.Lock()

    def refusals(self) -> dict[str, int]:
        with self._lock:
            return dict(self._refused)

    def bind(
        self, node: str, pods: Sequence[Pod], provisioner: str, report: BatchReport, snapshot: BindSnapshot
    ) -> int:
        """Re-check and bind `pods` to `node`; how many were bound. Pods kube-scheduler binds get
        their room held there instead."""
        deferred = [p for p in pods if p.deferred]
        self.nominations.nominate(node, deferred, launched=bool(provisioner))
        report.count("nominated", len(deferred))
        pods = [p for p in pods if not p.deferred]
        if not pods:
            return 0
        t0 = self.clock()
        admitted, refused, startup = self._recheck(node, pods, snapshot)
        report.add("recheck", self.clock() - t0)
        for pod, reason in refused:
            self._refuse(pod, node, reason)
        if startup:
            # As Karpenter leaves them: kube-scheduler binds these once the startup taints are gone.
            tolerated = {p.key: p.tolerates(startup) is None for p in admitted}
            waiting = [p for p in admitted if not tolerated[p.key]]
            why = "startup taint " + ", ".join(describe_taint(t) for t in startup)
            self.nominations.nominate(node, waiting, launched=bool(provisioner), waiting_for=why)
            report.count("nominated", len(waiting))
            admitted = [p for p in admitted if tolerated[p.key]]
        if not admitted:
            return 0
        t0 = self.clock()
        bound, failed = self._bind_all(node, admitted, self.reporter.scheduled(provisioner))
        elapsed = self.clock() - t0
        report.add("binds", elapsed)
        metrics.BIND.labels(provisioner=provisioner).observe(elapsed)
        metrics.PODS_BOUND.labels(provisioner=provisioner).inc(len(bound))
        if failed:
            snapshot.forget(node, failed)
            # Back through the window: a failed bind is retried a batch later, never dropped.
            self.requeue(p.key for p in failed)
        return len(bound)

    def _bind_all(
        self, node: str, pods: Sequence[Pod], on_bound: Callable[[Pod, str], None]
    ) -> tuple[list[Pod], list[Pod]]:
        """(bound, failed)."""
        self.state.reserve(node, {p.key: p.requests for p in pods})

        def one(pod: Pod) -> bool:
            try:
                kube_bind.bind(self.kube, namespace=pod.namespace, name=pod.name, uid=pod.uid, node=node)
            except kube_bind.AlreadyBound as err:
                log.info("Pod %s already bound, %s", pod.key, err)
                return True
            except ClusterError as err:  # the pod stays pending and returns in the next batch
                log.error("Failed to bind %s to %s, %s", pod.key, node, err)
                return False
            self.assume(pod, node)
            on_bound(pod, node)
            return True

        try:
            results = list(self.pools.bind.map(one, pods))
        finally:
            self.state.release(node, [p.key for p in pods])
        bound = [p for p, ok in zip(pods, results, strict=True) if ok]
        failed = [p for p, ok in zip(pods, results, strict=True) if not ok]
        if bound:
            log.info("Bound %d pod(s) to node %s", len(bound), node)
        return bound, failed

    def _recheck(
        self, node: str, pods: Sequence[Pod], snapshot: BindSnapshot
    ) -> tuple[list[Pod], list[tuple[Pod, str]], tuple[Taint, ...]]:
        """kube-scheduler's Filter for each pod on the node as it is now (read again, with the pods
        bound to it now) and the batch's picture of the rest of the cluster: (admitted, refused,
        the startup taints the node still carries, which the Filter here leaves out)."""
        try:
            current = kube_nodes.read_node(self.kube, node)
            if current is None:
                return [], [(p, f"node {node} is gone") for p in pods], ()
            on_node = kube_pods.list_on_node(self.kube, node)
        except ClusterError as err:  # the bind itself fails (and is retried) if the apiserver is away
            log.warning("Re-reading node %s before binding failed, binding as planned, %s", node, err)
            return list(pods), [], ()
        marked = self.state.marked()
        if not inventory.takes_pods(current, marked):
            snapshot.forget(node, pods)
            why = marked.get(node) or ("deleting" if current.deleting else "cordoned")
            return [], [(p, f"node {node} takes no more pods ({why})") for p in pods], ()
        pods_now = inventory.node_pods(on_node)
        bound = frozenset(p.key for p in pods_now.pods)
        held = inventory.with_held(pods_now, self.nominations.held_on(node), bound)
        live = inventory.existing_node(current, held, schedulable=True)
        admitted, refused = snapshot.admit(live, pods)
        return admitted, refused, current.startup_taints if current.is_karpy else ()

    def _refuse(self, pod: Pod, node: str, reason: str) -> None:
        """A pod the re-check refused stays pending: the next batch plans it against the cluster as
        it has become; refused again soon after, it waits for the parked retry instead."""
        log.info("Not binding pod %s to node %s, %s", pod.key, node, reason)
        self.reporter.pod_event(pod, NOT_BINDING_REASON, f"not binding to node {node}, {reason}")
        with self._lock:
            refusals = self._refused.get(pod.key, 0) + 1
            self._refused[pod.key] = refusals
        if refusals > 1:
            self.park([pod.key])
        else:
            self.requeue([pod.key])
