"""Capacity blocks about to end: their nodes are drained and replaced before EC2 reclaims them.

EC2 starts terminating a capacity block's instances 30 minutes before its end. Karpenter AWS
v1.14.1 (`pkg/controllers/capacityreservation/expiration/controller.go`, every minute) deletes the
NodeClaims of a block from 40 minutes before its end (`CapacityReservationFromEC2`: state
`expiring`), so their pods move while the instances still run; karpy does the same with the
interruption path (mark, cordon, replacements for the workload, delete: interruption.py
`cordon_and_drain`). The reservations are looked up by the ids on the nodes
(`karpenter.k8s.aws/capacity-reservation-id`), from whichever source the cloud provider uses.
A default ODCR never expires this way: EC2 leaves its instances running as on-demand.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from extender.api import labels as wk
from extender.api.capacity_reservations import EXPIRING, CapacityReservation, ReservationTerm
from extender.api.node import Node
from extender.cloud.types import CloudError
from extender.cluster.nodes import list_karpy_nodes
from extender.lifecycle.context import Context
from extender.lifecycle.interruption import cordon_and_drain

EVENT_REASON = "CapacityReservationExpiring"
#: The removal mark's reason and the `karpenter_nodes_terminated` reason.
MARK_REASON, TERMINATED_REASON = "capacity_block_expiring", "capacity_block_expiration"


def expiring(
    nodes: Sequence[Node], reservations: Sequence[CapacityReservation], now: datetime
) -> list[tuple[Node, CapacityReservation]]:
    """Pure: the live nodes in a reservation that is `expiring` at `now`, with that reservation."""
    by_id = {r.id: r for r in reservations}
    found = []
    for node in nodes:
        reservation = by_id.get(node.labels.get(wk.CAPACITY_RESERVATION_ID, ""))
        if reservation is not None and not node.deleting and reservation.state_at(now) == EXPIRING:
            found.append((node, reservation))
    return found


class ReservationExpiry:
    def __init__(self, ctx: Context, list_nodes: Callable[[], Sequence[Node]] | None = None) -> None:
        self.ctx = ctx
        self.list_nodes = list_nodes or (lambda: list_karpy_nodes(ctx.kube))

    def run_once(self) -> list[str]:
        """Drain the nodes of expiring capacity blocks; the names of those it started on."""
        ctx = self.ctx
        nodes = [n for n in self.list_nodes() if n.labels.get(wk.CAPACITY_RESERVATION_ID) and not n.deleting]
        if not nodes:
            return []
        ids = sorted({n.labels[wk.CAPACITY_RESERVATION_ID] for n in nodes})
        try:
            found = ctx.cloud.capacity_reservations([ReservationTerm(id=i) for i in ids])
        except CloudError as err:
            # The other lifecycle steps of the pass go on; the next check asks again.
            ctx.log.warning("Getting capacity reservations %s failed, %s", ids, err)
            return []
        started = []
        for node, reservation in expiring(nodes, found, ctx.clock()):
            end = reservation.end_time.isoformat() if reservation.end_time else "?"
            ctx.recorder.node(
                node,
                EVENT_REASON,
                f"Capacity block {reservation.id} ends at {end}; draining the node before EC2 reclaims it",
                warning=True,
            )
            ctx.log.info(
                "Initiating delete for capacity block expiration, node %s, capacity-reservation-id %s",
                node.name,
                reservation.id,
            )
            cordon_and_drain(ctx, node, MARK_REASON, doing="expiring", reason=TERMINATED_REASON)
            started.append(node.name)
        return started
