"""Warm-up: what the first batch after a start or a leader failover would otherwise pay for, done
before `/readyz` answers 200.

Steps, in order (`STEPS`):
- `informers`: the pending-pod watch, the node index and the bound-pod index have listed once;
- `catalog`: the Provisioners, DaemonSet pods and the instance-type catalog with its prices (the
  batch's own `gather.context`: DescribeInstanceTypes pages, offerings, the price table);
- `solver`: one pod per Provisioner planned on that catalog, so the solver's per-Provisioner views
  of it (scheduling/views.py) are built and kept;
- `launch`: what a launch for that plan resolves before CreateFleet (subnets, security groups,
  AMIs, launch templates; `CloudProvider.prepare`), launching nothing.
Every replica warms up at start, leader or not, so a follower that takes over is warm; on gaining
leadership the leader warms `catalog`, `solver` and `launch` again (the cloud caches expire).
A step that fails is retried (ATTEMPTS, doubling BACKOFF_SECONDS), then given up with a warning:
the first batch then does it itself, and readiness does not wait on AWS forever.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from extender.api import labels as wk
from extender.api.pod import Pod
from extender.cloud.types import CloudProvider
from extender.provisioning import launcher
from extender.provisioning.gather import Context, Gatherer
from extender.scheduling.solver import solve

log = logging.getLogger("karpy.controller.warmup")
T = TypeVar("T")

STEPS = ("informers", "catalog", "solver", "launch")
#: Attempts per step at start before it is given up (on leadership: one).
ATTEMPTS = 3
#: How often the informers' first listing is looked at.
INFORMER_POLL_SECONDS = 0.05
#: Seconds between attempts, doubled each time.
BACKOFF_SECONDS = 2.0
#: Requests of the pod planned per Provisioner; the smallest a node could hold.
WARM_POD_REQUESTS = {"cpu": "10m", "memory": "16Mi"}


class Readiness:
    """The warm-up steps not finished yet; `/readyz` reads `waiting`. Thread-safe."""

    def __init__(self, steps: Sequence[str] = STEPS) -> None:
        self._waiting = list(steps)
        self._lock = threading.Lock()
        self.done_event = threading.Event()
        if not self._waiting:
            self.done_event.set()

    def waiting(self) -> list[str]:
        with self._lock:
            return list(self._waiting)

    def done(self, step: str) -> None:
        with self._lock:
            if step in self._waiting:
                self._waiting.remove(step)
            if not self._waiting:
                self.done_event.set()

    @property
    def ready(self) -> bool:
        return self.done_event.is_set()


def warm_pod(provisioner: str) -> Pod:
    """A pod only `provisioner` takes, tolerating every taint (the Provisioner's own included)."""
    return Pod.from_manifest(
        {
            "metadata": {"name": f"karpy-warm-up-{provisioner}", "namespace": "karpy-warm-up"},
            "spec": {
                "nodeSelector": {wk.PROVISIONER_NAME: provisioner},
                "tolerations": [{"operator": "Exists"}],
                "containers": [{"name": "c", "resources": {"requests": WARM_POD_REQUESTS}}],
            },
        }
    )


class Warmup:
    """Runs the steps once at start (`run`) and the cloud-facing ones again on leadership (`again`)."""

    def __init__(
        self,
        *,
        gather: Gatherer,
        cloud: CloudProvider,
        informers: Sequence[Callable[[], bool]],
        readiness: Readiness | None = None,
    ) -> None:
        """`informers`: whether each watch has listed once."""
        self.gather, self.cloud, self.informers = gather, cloud, informers
        self.readiness = readiness or Readiness()
        #: `run` has begun: leadership gained before it ends leaves the warming to it.
        self._started = threading.Event()

    def run(self, stop: threading.Event) -> None:
        self._started.set()
        started = time.monotonic()
        while not all(synced() for synced in self.informers):
            if stop.wait(INFORMER_POLL_SECONDS):
                return
        self.readiness.done("informers")
        self._warm(stop, ATTEMPTS)
        log.info("Warmed up in %.3fs", time.monotonic() - started)

    def again(self, stop: threading.Event) -> None:
        """On gaining leadership: the catalog, the plan and the launch prerequisites once more (cheap
        while the caches hold them; what expired while following is fetched now, not by a batch).
        Nothing while the start's warm-up still runs: it is doing the same (a batch meanwhile waits
        for the catalog it is fetching, under the catalog's lock), and an informer that never syncs
        must not hold up the loop. One attempt per step."""
        if self._started.is_set() and not self.readiness.ready:
            return
        started = time.monotonic()
        self._warm(stop, 1)
        log.info("Warmed up again on leadership in %.3fs", time.monotonic() - started)

    def _warm(self, stop: threading.Event, attempts: int) -> None:
        ctx = self._step("catalog", self._context, stop, attempts)
        self.readiness.done("catalog")
        groups = self._step("solver", lambda: self._plan(ctx), stop, attempts) if ctx else None
        self.readiness.done("solver")
        if groups:
            self._step("launch", lambda: self.cloud.prepare([g.request for g in groups]), stop, attempts)
        self.readiness.done("launch")

    def _context(self) -> Context:
        """What a batch reads first; the catalog too when no Provisioner exists yet (the first one
        created will want it)."""
        ctx = self.gather.context()
        if not ctx.provisioners:
            self.cloud.get_instance_types(None)
        return ctx

    @staticmethod
    def _plan(ctx: Context) -> list[launcher.LaunchGroup]:
        """One pod per Provisioner, planned as a batch plans it; the launches it would make."""
        groups = []
        for name, provisioner in ctx.provisioners.items():
            plan = solve(
                [warm_pod(name)], [provisioner], ctx.catalog, daemonsets=ctx.daemonsets, with_bound=False
            )
            groups += launcher.group(plan.nodes, ctx.provisioners)
        return groups

    def _step(self, step: str, call: Callable[[], T], stop: threading.Event, attempts: int) -> T | None:
        delay = BACKOFF_SECONDS
        for attempt in range(1, attempts + 1):
            try:
                return call()
            except Exception as err:  # the warm-up's boundary: a batch does the step itself later
                if attempt == attempts or stop.is_set():
                    log.warning("Warming up %s failed, the first batch does it, %s", step, err)
                    return None
                log.info("Warming up %s failed, retrying in %.0fs, %s", step, delay, err)
                if stop.wait(delay):
                    return None
                delay *= 2
        return None
