"""Pools the solver cannot plan with: left out of the plan, the others planned.

A NodePool that loads may still hold a value the pure core cannot compute with (a `Gt` requirement
of thousands of digits: `int()` refuses it), and one such pool made every batch fail for every pool.
When a solve raises karpy's own error, each pool is solved alone with the batch's pods to find the
ones that raise; they are reported once per spec and error (an ERROR line, a Warning
`FailedPlanning` Event on the pool, `karpy_unhandled_objects{kind="UnplannablePool"}`) and left out
of every plan until their spec changes (karpy's own status writes bump the resourceVersion every
minute, so that would report them again). Only the failure path pays the solo solves.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from extender.api.provisioner import Provisioner
from extender.cluster.quarantine import Quarantine, short
from extender.loops import is_expected
from extender.scheduling.plan import Plan

log = logging.getLogger("karpy.controller.provisioning")

FAILED_PLANNING_REASON = "FailedPlanning"
#: Tells of a pool left out: (pool, error text); the caller records the Event.
Report = Callable[[Provisioner, str], None]


class Unplannable:
    def __init__(self, report: Report = lambda _pool, _message: None) -> None:
        self.report = report
        self.faults = Quarantine("UnplannablePool")
        self._lock = threading.Lock()
        #: name -> the spec it was left out at
        self._left_out: dict[str, Provisioner] = {}

    def usable(self, pools: Sequence[Provisioner]) -> list[Provisioner]:
        """`pools` less those left out at their current spec (an edited one is tried)."""
        with self._lock:
            return [p for p in pools if self._left_out.get(p.name) != p.spec_only()]

    def solve(self, pools: Sequence[Provisioner], run: Callable[[list[Provisioner]], Plan]) -> Plan:
        """`run(pools)`; when it raises karpy's own error, again without the pools that raise alone."""
        usable = self.usable(pools)
        try:
            return run(usable)
        except Exception as err:
            if is_expected(err):
                raise
            bad = [(pool, failure) for pool in usable if (failure := _fails(run, pool)) is not None]
            if not bad:
                raise
        for pool, failure in bad:
            self._leave_out(pool, failure)
        return run([p for p in usable if p not in [b for b, _ in bad]])

    def _leave_out(self, pool: Provisioner, message: str) -> None:
        with self._lock:
            self._left_out[pool.name] = pool.spec_only()
        if self.faults.failed(pool.name, pool.spec_only(), message):
            log.error("Leaving %s %s out of planning, %s", pool.noun, pool.name, short(message, 1000))
            self.report(pool, f"karpy cannot plan with this {pool.noun}, {short(message)}")


def _fails(run: Callable[[list[Provisioner]], Plan], pool: Provisioner) -> str | None:
    try:
        run([pool])
    except Exception as err:  # the probe: which pool raises alone
        return f"{type(err).__name__}: {err}"
    return None
