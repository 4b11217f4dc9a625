"""Writes consolidation's verdict on each node (verdict.py) where a user looks: the
`Consolidatable` condition of its NodeClaim and an Event on the Node (`Unconsolidatable` with the
blockers, `Consolidatable` once nothing blocks it), only when the verdict's reasons change.

A thin adapter: the verdicts are computed purely from the pass's ClusterView. The last reasons
written are kept per node in memory; a node this process has not written yet is compared with the
condition already on its claim, so a restart (or a new leader) writes and announces nothing that
has not changed. A v1alpha5 Provisioner's node has no NodeClaim: it gets the Event only, and after
a restart its current verdict is announced once more.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping

from extender.api import nodeclaim as nc
from extender.api.node import Node
from extender.api.provisioner import Provisioner
from extender.cluster.nodeclaims import Tracker
from extender.lifecycle.consolidation.verdict import Verdict

log = logging.getLogger("karpy.lifecycle.consolidation")


class VerdictWriter:
    def __init__(self, claims: Tracker | None, event: Callable[[Node, str, str], None]) -> None:
        """`claims`: the NodeClaim tracker the node worker writes through (one writer per claim, so
        neither overwrites the other's status with a stale copy); `event(node, reason, message)`."""
        self.claims = claims
        self.event = event
        self._lock = threading.Lock()
        #: Node -> (status, reason) last written for it.
        self._written: dict[str, tuple[str, str]] = {}

    def write(
        self,
        verdicts: Mapping[str, Verdict],
        nodes: Mapping[str, Node],
        provisioner: Callable[[str], Provisioner | None],
    ) -> list[str]:
        """Write each changed verdict; the nodes written. Nodes no longer in `nodes` are forgotten
        (one leaving keeps its last verdict: it has none while it goes)."""
        changed = []
        for name, verdict in sorted(verdicts.items()):
            node = nodes.get(name)
            if node is None:
                continue
            prov = provisioner(node.provisioner or "")
            if self._last(node, prov) == (verdict.status, verdict.reason):
                continue
            if self.claims is not None:
                condition = nc.Condition(nc.CONSOLIDATABLE, verdict.status, verdict.reason, verdict.message)
                self.claims.sync(node, prov, consolidatable=condition)
            self.event(node, verdict.event_reason, verdict.message)
            log.info(
                "Node %s consolidatable=%s (%s): %s", name, verdict.status, verdict.reason, verdict.message
            )
            with self._lock:
                self._written[name] = (verdict.status, verdict.reason)
            changed.append(name)
        with self._lock:
            for gone in self._written.keys() - nodes.keys():
                del self._written[gone]
        return changed

    def _last(self, node: Node, prov: Provisioner | None) -> tuple[str, str] | None:
        with self._lock:
            last = self._written.get(node.name)
        if last is not None or self.claims is None:
            return last
        found = self.claims.condition(node, prov, nc.CONSOLIDATABLE)
        return None if found is None else (found.status, found.reason)
