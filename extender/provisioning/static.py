"""Static NodePools (`spec.replicas`): keep exactly `replicas` nodes, whatever the pods.

Ported from Karpenter's static controllers (kubernetes-sigs/karpenter pkg/controllers/static):
- provisioning: a pool short of its replicas launches the missing nodes, no more than its
  `limits.nodes` leaves (`ComputeNodeClaimsToProvision`), each of the cheapest type its
  requirements allow (scheduling/static.py), through the same launch and register steps as a batch;
- deprovisioning: a pool over its replicas removes the surplus through the normal termination path
  (the Node is deleted; its finalizer drains it), choosing empty nodes first (no pods but
  DaemonSet pods, none with `karpenter.sh/do-not-disrupt`), then nodes without do-not-disrupt pods,
  then by the `karpenter.sh/deprovisioning-priority` annotation (higher first), then fewest pods
  (karpy's stand-in for Karpenter's rescheduling cost). Karpenter removes unlaunched NodeClaims
  before all of these; a karpy Node exists only once its instance runs, so there are none.

Nodes marked for removal or deleting do not count towards the replicas (Karpenter counts only
running NodeClaims), so a drifted or expired static node is replaced as soon as it is marked; they
still count against `limits.nodes`, a hard limit (designs/nodepool-node-limits.md).

`decide` is pure; `StaticCapacity` is the adapter the provisioning controller runs every
STATIC_SECONDS on the leader, under the batch lock.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from kubernetes import client

from extender.api.disruption import DO_NOT_DISRUPT
from extender.api.node import Node
from extender.api.pod import Pod
from extender.api.provisioner import Provisioner
from extender.api.resources import NODES
from extender.cluster import nodes as kube_nodes
from extender.cluster import pods as kube_pods
from extender.cluster import pool_resources as kube_provisioners
from extender.cluster.boundpods import BoundPods
from extender.cluster.errors import ClusterError
from extender.cluster.nodeindex import NodeIndex
from extender.provisioning.gather import Context
from extender.scheduling.instancetypes import OfferingKey
from extender.scheduling.plan import PlannedNode
from extender.scheduling.static import static_node
from extender.settings import Settings
from extender.state import ClusterState

log = logging.getLogger("karpy.controller.static")

#: How often the leader compares each static NodePool with its nodes.
STATIC_SECONDS = 2.0
#: Karpenter's NodeClaim annotation, read here from the Node: higher is removed first.
DEPROVISIONING_PRIORITY = "karpenter.sh/deprovisioning-priority"
#: Why karpy removes a static pool's surplus node (Karpenter's TerminationReason).
OVERPROVISIONED = "overprovisioned"
#: Nodes one pass launches for one pool at most (a replicas typo must not become one huge fleet).
MAX_LAUNCH_PER_PASS = 100


@dataclass(frozen=True)
class Member:
    """One node of a static pool, as the removal order reads it."""

    name: str
    #: Live pods bound to it, DaemonSet pods left out.
    pods: int = 0
    #: The node or one of its pods carries karpenter.sh/do-not-disrupt.
    do_not_disrupt: bool = False
    priority: int = 0

    @property
    def empty(self) -> bool:
        return self.pods == 0 and not self.do_not_disrupt


@dataclass(frozen=True)
class Decision:
    launch: int = 0
    remove: tuple[str, ...] = ()


def decide(pool: Provisioner, active: Sequence[Member], total: int) -> Decision:
    """What `pool` needs now. `active`: its nodes that count towards the replicas (not deleting, not
    marked for removal); `total`: all its nodes, which `limits.nodes` caps."""
    replicas = pool.replicas or 0
    if len(active) < replicas:
        want = replicas - len(active)
        if NODES in pool.limited:
            want = min(want, int(pool.limits.get(NODES)) - total)
        return Decision(launch=max(0, min(want, MAX_LAUNCH_PER_PASS)))
    surplus = len(active) - replicas
    if surplus <= 0:
        return Decision()
    order = sorted(active, key=lambda m: (not m.empty, m.do_not_disrupt, -m.priority, m.pods, m.name))
    return Decision(remove=tuple(m.name for m in order[:surplus]))


def member(node: Node, pods: Sequence[Pod]) -> Member:
    workload = [p for p in pods if not p.is_daemonset]
    protected = node.annotations.get(DO_NOT_DISRUPT) == "true" or any(
        p.annotations.get(DO_NOT_DISRUPT) == "true" for p in pods
    )
    try:
        priority = int(node.annotations.get(DEPROVISIONING_PRIORITY, "0"))
    except ValueError:
        priority = 0  # Karpenter reads an unparsable priority as 0 too
    return Member(node.name, len(workload), protected, priority)


def launch_id(pool: Provisioner, nodes: Sequence[str], count: int) -> str:
    """The same pool version, nodes and count -> the same id: a leader that crashed after CreateFleet
    finds those instances (their Nodes are adopted) instead of launching again."""
    key = "\n".join(["static", pool.name, pool.uid, pool.resource_version, str(count), *sorted(nodes)])
    return hashlib.sha256(key.encode()).hexdigest()[:32]


class StaticCapacity:
    def __init__(
        self,
        *,
        kube: client.ApiClient,
        settings: Settings,
        state: ClusterState,
        nodes: NodeIndex,
        bound: BoundPods,
        context: Callable[[], Context],
        unavailable: Callable[[], frozenset[OfferingKey]],
        launch: Callable[[Sequence[PlannedNode], Mapping[str, Provisioner], str], list[str]],
    ) -> None:
        self.kube = kube
        self.settings = settings
        self.state = state
        self.nodes = nodes
        self.bound = bound
        self.context = context
        self.unavailable = unavailable
        self.launch = launch

    def static_pools(self) -> list[Provisioner]:
        """The static NodePools now (read outside the batch lock: most clusters have none)."""
        return [p for p in kube_provisioners.list_configured(self.kube, self.settings) if p.is_static]

    def reconcile(self, pools: Sequence[Provisioner]) -> None:
        """One pass over the static NodePools `pools` (from `static_pools`), under the batch lock."""
        nodes = self.nodes.current(lambda: kube_nodes.list_node_manifests(self.kube))
        bound = self.bound.current(lambda: kube_pods.list_assigned(self.kube))
        marked = self.state.marked()
        ctx: Context | None = None
        for pool in pools:
            mine = [n for n in nodes if n.provisioner == pool.name]
            active = [
                member(n, bound.on(n.name).pods) for n in mine if not n.deleting and n.name not in marked
            ]
            decision = decide(pool, active, len(mine))
            if decision.remove:
                self._remove(pool, decision.remove, len(active))
            elif decision.launch:
                ctx = ctx or self.context()
                # The batch's own view of the pool: its NodeOverlays resolved (prices, capacity).
                planned_pool = ctx.provisioners.get(pool.name, pool)
                self._launch(planned_pool, decision.launch, ctx, [n.name for n in mine])
            elif len(active) < (pool.replicas or 0):
                log.info("Not launching for static nodepool %s, nodepool node limit reached", pool.name)

    def _launch(self, pool: Provisioner, count: int, ctx: Context, nodes: Sequence[str]) -> None:
        planned = static_node(pool, ctx.catalog, daemonsets=ctx.daemonsets, unavailable=self.unavailable())
        if planned is None:
            log.warning("No instance type satisfies the requirements of static nodepool %s", pool.name)
            return
        log.info("Provisioning %d node(s) for static nodepool %s", count, pool.name)
        self.launch([planned] * count, {pool.name: pool}, launch_id(pool, nodes, count))

    def _remove(self, pool: Provisioner, names: Sequence[str], current: int) -> None:
        log.info(
            "Deprovisioning %d node(s) of static nodepool %s to satisfy replica count"
            " (current %d, desired %d)",
            len(names),
            pool.name,
            current,
            pool.replicas or 0,
        )
        for name in names:
            # The guard keeps kube-scheduler off it before the delete lands; the finalizer drains it.
            self.state.mark_for_removal(name, OVERPROVISIONED)
            try:
                kube_nodes.delete_node(self.kube, name)
            except ClusterError as err:
                self.state.unmark(name)
                log.warning("Failed to delete node %s of static nodepool %s, %s", name, pool.name, err)
