"""NodeOverlays in the controller: the informer's overlays resolved against the pools and the catalog
(extender/scheduling/overlays.py `resolve`), handed to everything that plans with those pools
(provisioning's batches and warm-up, consolidation), and their status kept by the leader.

Karpenter's nodeoverlay controller re-evaluates on every NodeOverlay, NodePool or NodeClass change
and every 6 h, and its cloud-provider decorator hands the result to every GetInstanceTypes call.
Here a batch resolves what it planned with (memoised while the overlays, the pools and the catalog
list are the same), and `run` writes the statuses after every overlay change and every minute.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from extender.api.provisioner import Overlay, Provisioner
from extender.cluster.nodeoverlays import NodeOverlays
from extender.heartbeat import no_tick
from extender.loops import run_forever
from extender.scheduling.instancetypes import InstanceType
from extender.scheduling.overlays import Resolution, resolve

log = logging.getLogger("karpy.controller.nodeoverlay")

#: How often the leader writes the statuses without a change (Karpenter requeues after 6 h; the
#: catalog and the pools change without an overlay event too).
STATUS_PERIOD_SECONDS = 60.0
#: How often the status loop looks for an overlay change.
POLL_SECONDS = 1.0


class Overlays:
    """What `apply` hands out and `run` reports, for one controller process."""

    def __init__(self, index: NodeOverlays, is_leader: Callable[[], bool] = lambda: True) -> None:
        self.index = index
        self.is_leader = is_leader
        self._lock = threading.Lock()
        self._last: (
            tuple[tuple[Overlay, ...], tuple[Provisioner, ...], Sequence[InstanceType], Resolution] | None
        ) = None
        self._reported: tuple[str, ...] = ()

    def resolution(self, provisioners: Sequence[Provisioner], catalog: Sequence[InstanceType]) -> Resolution:
        overlays = self.index.current()
        pools = tuple(provisioners)
        with self._lock:
            last = self._last
        if last is not None and last[2] is catalog and last[0] == overlays and last[1] == pools:
            return last[3]
        found = resolve(overlays, pools, catalog)
        with self._lock:
            self._last = (overlays, pools, catalog, found)
        self._report(found)
        return found

    def apply(
        self, provisioners: Sequence[Provisioner], catalog: Sequence[InstanceType]
    ) -> list[Provisioner]:
        """The pools with the overlays that apply to each (the same pools when there are none)."""
        return list(self.resolution(provisioners, catalog).provisioners)

    def _report(self, found: Resolution) -> None:
        if found.conflicts == self._reported:
            return
        self._reported = found.conflicts
        for name in found.conflicts:
            log.error("Ignoring nodeoverlay %s, conflict with another overlay", name)

    def reconcile(self, provisioners: Sequence[Provisioner], catalog: Sequence[InstanceType]) -> int:
        """Write the statuses of every overlay (leader only); how many changed."""
        if not self.is_leader():
            return 0
        self.index.changed.clear()
        return self.index.write_status(self.resolution(provisioners, catalog).conflicts)

    def run(
        self,
        stop: threading.Event,
        pools: Callable[[], Sequence[Provisioner]],
        catalog: Callable[[], Sequence[InstanceType]],
        *,
        tick: Callable[[], None] = no_tick,
    ) -> None:
        """Write the statuses after each change of the overlays and every STATUS_PERIOD_SECONDS."""
        last = -STATUS_PERIOD_SECONDS

        def one_pass() -> float:
            nonlocal last
            tick()
            if self.index.changed.is_set() or time.monotonic() - last >= STATUS_PERIOD_SECONDS:
                last = time.monotonic()
                if self.index.has_objects():
                    listed = pools()
                    self.reconcile(listed, catalog() if listed else [])
                else:
                    self.index.changed.clear()
            return POLL_SECONDS

        run_forever(one_pass, stop, doing="writing nodeoverlay status", tick=tick, logger=log)
