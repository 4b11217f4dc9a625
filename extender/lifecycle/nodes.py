"""The node worker: one keyed delay queue of node names, fed by Node and Pod watches.

Each pop reconciles one node with a fresh read: a deleting node goes through the termination
finalizer; a live one through readiness, finalizer, expiry, drift and emptiness, and is requeued at
the earliest time any of them asked for (an emptiness or expiry due time), never on a fixed tick.

One node karpy cannot handle stops no other: a reconcile that fails with karpy's own error (not the
API server's or the cloud's, which are retried as the queue retries them) quarantines the node — an
ERROR line and a Warning Event once per resourceVersion and error, `karpy_unhandled_objects{kind=
"Node"}` — and backs it off; the cross-node computations (the due list, the budget census) skip it.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from extender.api import labels
from extender.api.node import Node
from extender.api.pod import Pod
from extender.api.provisioner import Provisioner
from extender.cluster.nodeclaims import KEEP, Tracker
from extender.cluster.quarantine import Quarantine, short
from extender.lifecycle import budgets, drift, emptiness, metrics, nodepatch, readiness, repair
from extender.lifecycle.budgets import DisruptionLedger
from extender.lifecycle.context import Context
from extender.lifecycle.expiry import Expiry, expires_at
from extender.lifecycle.podevents import PodEvents
from extender.lifecycle.termination import Step, Terminator
from extender.lifecycle.workqueue import DelayQueue, serve
from extender.loops import is_expected

TERMINATING_POLL_SECONDS = 1.0
#: A node whose Provisioner is not (yet) known is looked at again after this long.
PROVISIONER_RECHECK_SECONDS = 30.0


class NodeWorker:
    def __init__(
        self,
        ctx: Context,
        provisioners: Callable[[str | None], Provisioner | None],
        *,
        queue: DelayQueue[str] | None = None,
        ledger: DisruptionLedger | None = None,
        fresh: Callable[[Node], Provisioner | None] | None = None,
    ) -> None:
        self.ctx = ctx
        self.provisioners = provisioners
        #: A node's Provisioner from a listing newer than the node (drift's verdicts are judged on it).
        self.fresh = fresh or (lambda node: provisioners(node.provisioner))
        # `is None`: an empty queue is falsy (it has a length), and the one handed in must be kept.
        self.queue: DelayQueue[str] = queue if queue is not None else DelayQueue()
        self.expiry = Expiry()
        #: The disruption budgets emptiness, expiry and consolidation share.
        self.ledger = ledger or DisruptionLedger()
        self.terminator = Terminator()
        #: Last pod event per node, for consolidateAfter (read by consolidation).
        self.pod_events = PodEvents(lambda: self.ctx.clock())
        self._lock = threading.Lock()
        self._cache: dict[str, Node] = {}
        #: Drifted nodes -> (when found drifted, drift reason), until they are gone.
        self._drifting: dict[str, tuple[datetime, str]] = {}
        #: Nodes whose reconcile fails with karpy's own error: reported once, skipped, backed off.
        self.faults = Quarantine("Node")

    @functools.cached_property
    def claims(self) -> Tracker:
        """The NodeClaims of NodePool nodes (conditions as the node comes up, drifts, empties)."""
        return Tracker(self.ctx.kube, self.ctx.clock)

    # --- watch callbacks -------------------------------------------------------------------------

    def on_node(self, event: str, manifest: Mapping[str, Any]) -> None:
        """The Node informer's handler: API JSON enters here. A node that does not parse is
        quarantined; the watch goes on."""
        try:
            node = Node.from_live(manifest)
        except Exception as err:  # one node's boundary
            meta = manifest.get("metadata")
            if isinstance(meta, Mapping) and isinstance(meta.get("name"), str):
                self._failed(meta["name"], str(meta.get("resourceVersion") or ""), None, err)
            return
        self.track(event, node)

    def track(self, event: str, node: Node) -> None:
        with self._lock:
            if event == "DELETED":
                self._cache.pop(node.name, None)
            else:
                self._cache[node.name] = node
        self.queue.add(node.name)

    def on_pod(self, event: str, pod: Pod) -> None:
        self.pod_events.observe(event, pod)
        node = pod.node_name
        with self._lock:
            known = node in self._cache
        if node and known:
            self.queue.add(node)

    def enqueue_all(self) -> int:
        with self._lock:
            names = list(self._cache)
        return self.queue.add_all(names)

    # --- reconcile -------------------------------------------------------------------------------

    def process(self, name: str) -> None:
        """Reconcile `name` once; schedules its own requeue. The API server's and the cloud's
        failures leave (the queue retries them); karpy's own quarantine the node (module doc)."""
        node: Node | None = None
        try:
            node = nodepatch.get_node(self.ctx.kube, name)
            self._reconcile(name, node)
        except Exception as err:
            if is_expected(err):
                raise
            self._failed(name, node.resource_version if node else "", node, err)
            self.queue.add_backoff(name)
            return
        if self.faults.recovered(name):
            self.ctx.log.info("Reconciled node %s again", name)

    def _failed(self, name: str, version: str, node: Node | None, err: Exception) -> None:
        message = f"{type(err).__name__}: {err}"
        if not self.faults.failed(name, version, message):
            self.ctx.log.debug("Skipping node %s, %s", name, short(message))
            return
        self.ctx.log.error("Skipping node %s, karpy cannot reconcile it, %s", name, short(message))
        if node is not None:
            self.ctx.recorder.node(
                node, "FailedReconcile", f"karpy cannot reconcile this node, {short(message)}", warning=True
            )

    def _reconcile(self, name: str, node: Node | None) -> None:
        ctx = self.ctx
        if node is None or not node.is_karpy:
            self.faults.recovered(name)
            with self._lock:
                self._cache.pop(name, None)
                self._drifting.pop(name, None)
            self.expiry.finished(name)
            self.ledger.release(name)
            self.pod_events.forget(name)
            self.claims.forget_node(name)
            ctx.unmark(name)
            return
        if node.deleting:
            owner = self.provisioners(node.provisioner)
            step = self.terminator.reconcile(ctx, node, owner.termination_grace_period if owner else None)
            if step is Step.DONE:
                self.queue.forget(name)
                self.expiry.finished(name)
            elif step is Step.WAIT:
                self.queue.forget(name)
                self.queue.add(name, TERMINATING_POLL_SECONDS)
            else:
                self.queue.add_backoff(name)
                if (wake := self.terminator.wake_at(name)) is not None:
                    self.queue.add(name, (wake - ctx.clock()).total_seconds())
            return
        prov = self.provisioners(node.provisioner)
        repaired = repair.reconcile(ctx, node, self._pool_of(node))
        if repaired.terminated:
            return  # its deletion event brings it back, for the finalizer
        delays = [
            readiness.reconcile(ctx, node, prov),
            None if prov else PROVISIONER_RECHECK_SECONDS,
            repaired.requeue_after,
        ]
        if nodepatch.ensure_finalizer(ctx.kube, node, labels.TERMINATION_FINALIZER):
            return  # the update event brings the node back with a fresh resourceVersion
        pods = nodepatch.pods_on_node(ctx.kube, name)
        expiry_ttl = prov.ttl_seconds_until_expired if prov else None
        delays.append(
            self.expiry.reconcile(
                ctx,
                node,
                expiry_ttl,
                pods=pods,
                deleting=self._deleting(),
                due=self._due(),
                admit=lambda: self.admit(prov, name, "expired"),
            )
        )
        expired = (at := expires_at(node, expiry_ttl)) is not None and ctx.clock() >= at
        if prov is not None and not node.deleting and not expired:
            delays.append(self._drift(node, prov, pods))
        if prov is not None and prov.records_nodeclaims:
            self._record(node, prov, pods)
        if not node.deleting and name not in self.expiry.active():
            empty_ttl = prov.ttl_seconds_after_empty if prov else None
            delays.append(
                emptiness.reconcile(ctx, node, pods, empty_ttl, admit=lambda: self.admit(prov, name, "empty"))
            )
        ctx.release_stale_taint(node)
        pending = [d for d in delays if d is not None]
        if pending:
            self.queue.add(name, min(pending))

    def run(self, stop: threading.Event) -> None:
        serve(
            self.queue,
            stop,
            self.process,
            is_leader=self.ctx.is_leader,
            log=self.ctx.log,
            doing="reconciling node",
        )

    def _drift(self, node: Node, prov: Provisioner, pods: list[Pod]) -> float | None:
        """Replace a drifted node through expiry's path; a node not yet being replaced is checked
        again each time (its Provisioner may have changed back)."""
        name, ctx = node.name, self.ctx
        if self.ledger.held().get(name) not in (None, drift.DRIFTED):
            return None  # being expired, emptied or consolidated already: one replacement at a time
        with self._lock:
            found = self._drifting.get(name)
        if found is None or name not in self.expiry.active():
            reason = drift.check(ctx, node, prov, reread=lambda: self.fresh(node))
            if reason is None:
                with self._lock:
                    self._drifting.pop(name, None)
                self.expiry.hold(name, False)
                return None
            with self._lock:
                found = self._drifting.setdefault(name, (ctx.clock(), reason))
        since, reason = found
        # On the claim before the replacement starts, or while do-not-disrupt holds the node.
        self.claims.sync(node, prov, drifted=reason)
        blocker = None if name in self.expiry.active() else drift.blocker(node, pods)
        # A held node takes no place in the queue for disruption slots: the next due node goes first.
        self.expiry.hold(name, blocker is not None)
        if blocker is not None:
            # Drift is graceful: a node still coming up, a do-not-disrupt node or pod holds it (pod and
            # node events look again).
            metrics.disruption("drifted", "blocked")
            ctx.log.debug("Drifted node %s is not disrupted, %s", name, blocker)
            return None
        return self.expiry.replace(
            ctx,
            node,
            drift.DRIFTED,
            since,
            pods=pods,
            deleting=self._deleting(),
            due=self._due(),
            admit=lambda: self.admit(prov, name, drift.DRIFTED),
            why=f"({reason})",
        )

    def _record(self, node: Node, prov: Provisioner, pods: list[Pod]) -> None:
        """The node's NodeClaim: its lifecycle conditions, Drifted as drift found it, Consolidatable
        once its emptiness TTL has run out (written before emptiness deletes the node); a
        consolidating pool's Consolidatable is consolidation's verdict (consolidation/verdict_writer.py)."""
        with self._lock:
            found = self._drifting.get(node.name)
        decision = emptiness.decide(node, pods, prov.ttl_seconds_after_empty, self.ctx.clock())
        self.claims.sync(
            node,
            prov,
            drifted=found[1] if found else None,
            consolidatable=KEEP if prov.consolidation else decision.action is emptiness.Action.TERMINATE,
        )

    def admit(self, prov: Provisioner | None, node: str, reason: str) -> bool:
        """Take a slot of the Provisioner's disruption budget for `node` (shared with consolidation)."""
        if prov is None:
            return True
        allowed = budgets.limit(prov, budgets.BUDGET_REASONS[reason], self.ctx.clock())
        return self.ledger.acquire(prov.name, [node], reason, allowed=allowed, **self.census(prov.name))

    def census(self, provisioner: str) -> dict[str, Any]:
        """The Provisioner's node count and its deleting nodes, as the budget counts them."""
        own = self._own(provisioner)
        return {"total": len(own), "deleting": {node.name for node in own if node.deleting}}

    def _own(self, provisioner: str | None) -> list[Node]:
        """The cached nodes of one NodePool/Provisioner."""
        with self._lock:
            return [node for node in self._cache.values() if node.provisioner == provisioner]

    def _pool_of(self, node: Node) -> list[Node]:
        """Every cached node of `node`'s NodePool/Provisioner, `node` (as just read) included."""
        return [node, *(n for n in self._own(node.provisioner) if n.name != node.name)]

    def _deleting(self) -> set[str]:
        with self._lock:
            return {name for name, node in self._cache.items() if node.deleting}

    def _due(self) -> list[tuple[str, Any]]:
        """(name, due time) of every node due for replacement; a node whose due time cannot be
        computed is skipped (and quarantined), never failing the others'."""
        with self._lock:
            nodes = list(self._cache.values())
        due = []
        for node in nodes:
            try:
                prov = self.provisioners(node.provisioner)
                at = expires_at(node, prov.ttl_seconds_until_expired if prov else None)
            except Exception as err:
                if is_expected(err):
                    raise
                self._failed(node.name, node.resource_version, node, err)
                continue
            if at is not None and not node.deleting:
                due.append((node.name, at))
        with self._lock:
            due += [(name, since) for name, (since, _) in self._drifting.items()]
        return due
