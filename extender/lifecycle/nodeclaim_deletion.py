"""Deleting a NodeClaim terminates its node (`kubectl delete nodeclaim`), as in Karpenter v1.

Karpenter's nodeclaim termination controller (kubernetes-sigs/karpenter
pkg/controllers/nodeclaim/termination/controller.go `Finalize`): while the claim carries
`karpenter.sh/termination`, delete each of its nodes not yet deleting and wait until they are gone,
then delete the instance and lift the finalizer. karpy's Node deletion is its graceful termination
(lifecycle/termination.py: cordon, drain with PDBs and do-not-disrupt until the
terminationGracePeriod, terminate the instance), which itself deletes the claim and lifts the
finalizer; this worker starts it, and finishes claims whose node is already gone (a launch whose
Node was never written, a node removed without karpy's finalizer).

Fed by the NodeClaim informer; acts only while leader. A claim deleted without the finalizer (one
written before claims carried it, until the node worker adds it) is gone before anything can act:
its node stays, and the node worker records it again.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any

from extender.api.node import Node
from extender.api.nodeclaim import Record
from extender.cloud.types import InstanceNotFoundError
from extender.cluster import nodeclaims
from extender.cluster.nodes import instance_id
from extender.lifecycle import nodepatch
from extender.lifecycle.context import Context
from extender.lifecycle.workqueue import DelayQueue, serve

#: How often a claim whose node is terminating is looked at again (the node's termination
#: normally finishes the claim itself; this catches a node that went another way).
TERMINATING_POLL_SECONDS = 5.0


class Action(Enum):
    NONE = "none"  # not being deleted, or not held by karpy's finalizer
    DELETE_NODES = "delete-nodes"  # start the nodes' graceful termination
    WAIT = "wait"  # its nodes are terminating
    FINALIZE = "finalize"  # no node left: terminate the instance, lift the finalizer


def nodes_of(claim: Record, nodes: Sequence[Node]) -> list[Node]:
    """The claim's nodes: by name or by provider id (Karpenter's AllNodesForNodeClaim matches the
    provider id)."""
    iid = instance_id(claim.provider_id)
    return [
        n
        for n in nodes
        if (claim.node_name and n.name == claim.node_name) or (iid and instance_id(n.provider_id) == iid)
    ]


def decide(claim: Record, nodes: Sequence[Node]) -> Action:
    """Pure: what a claim's deletion needs next, given its nodes (`nodes_of`)."""
    if not claim.deleting or not claim.finalized:
        return Action.NONE
    if any(not n.deleting for n in nodes):
        return Action.DELETE_NODES
    return Action.WAIT if nodes else Action.FINALIZE


class ClaimTerminator:
    """One delay queue of claim names, fed by the NodeClaim informer."""

    def __init__(self, ctx: Context, *, queue: DelayQueue[str] | None = None) -> None:
        self.ctx = ctx
        self.queue: DelayQueue[str] = queue if queue is not None else DelayQueue()
        self._lock = threading.Lock()
        self._deleting: set[str] = set()

    def on_claim(self, event: str, manifest: Mapping[str, Any]) -> None:
        """The NodeClaim informer's handler."""
        claim = Record.from_manifest(manifest)
        with self._lock:
            if event == "DELETED" or not claim.deleting:
                self._deleting.discard(claim.name)
                return
            self._deleting.add(claim.name)
        self.queue.add(claim.name)

    def enqueue_all(self) -> int:
        """Every claim seen being deleted (a new leader picks up what the last one left)."""
        with self._lock:
            names = list(self._deleting)
        return self.queue.add_all(names)

    def process(self, name: str) -> None:
        ctx = self.ctx
        manifest = nodeclaims.read(ctx.kube, name)
        if manifest is None:
            with self._lock:
                self._deleting.discard(name)
            return
        claim = Record.from_manifest(manifest)
        node = nodepatch.get_node(ctx.kube, claim.node_name) if claim.node_name else None
        nodes = nodes_of(claim, [node] if node is not None else [])
        action = decide(claim, nodes)
        if action is Action.DELETE_NODES:
            for n in nodes:
                if not n.deleting:
                    ctx.log.info("Deleting node %s of deleted nodeclaim %s", n.name, name)
                    nodepatch.delete_node(ctx.kube, n.name)
            self.queue.add(name, TERMINATING_POLL_SECONDS)
        elif action is Action.WAIT:
            self.queue.add(name, TERMINATING_POLL_SECONDS)
        elif action is Action.FINALIZE:
            iid = instance_id(claim.provider_id)
            if iid is not None:
                with contextlib.suppress(InstanceNotFoundError):  # already gone: what we wanted
                    ctx.cloud.delete(iid)
                ctx.log.info("Terminated instance %s of deleted nodeclaim %s", iid, name)
            if nodeclaims.release(ctx.kube, name):
                ctx.log.info("Deleted nodeclaim %s", name)

    def run(self, stop: threading.Event) -> None:
        serve(
            self.queue,
            stop,
            self.process,
            is_leader=self.ctx.is_leader,
            log=self.ctx.log,
            doing="terminating nodeclaim",
        )
