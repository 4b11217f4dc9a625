"""How pytest-xdist hands out the tests (`-n 3 --dist loadgroup`, pyproject's addopts): the
integration files on the session's local control plane in one group per worker, each group run by
one worker on its own cluster (session fixtures are per worker), in collection order; test_image.py's
tests together (one image build); every other test alone, to whichever worker is free.

The groups are balanced from each file's measured seconds (`SECONDS`): the longest file first, each
to the group with the fewest seconds so far. xdist's own loadgroup reads `xdist_group` marks into
node ids, which pytest 9's node ids no longer take; so the groups are told by file here
(`pytest_xdist_make_scheduler` in tests/conftest.py).
"""

from __future__ import annotations

import os
from functools import cache

from xdist.scheduler import LoadScopeScheduling

INTEGRATION = "tests/integration/"
#: Integration files that start clusters of their own: spread test by test.
OWN_CLUSTERS = frozenset(f"{INTEGRATION}{name}.py" for name in ("test_demo", "test_extender_tls"))
#: Files whose tests share a module fixture that must not run on both workers at once (the image
#: build, when `make image` has not built it yet): one group each, on a worker of its own choosing.
WHOLE_FILES = frozenset({f"{INTEGRATION}test_image.py"})
#: Seconds each cluster file's tests took in a clean-clone `.ci/run` (`--durations=0` summed per
#: file, main eff42d5, two workers). Only the balance reads them; a file not listed counts as
#: `UNLISTED_SECONDS`.
SECONDS = {
    "test_lifecycle": 279,
    "test_provisioning": 143,
    "test_isolation": 104,
    "test_node_repair": 99,
    "test_scheduler_binds": 99,
    "test_chaos": 90,
    "test_explain_node": 88,
    "test_drift": 86,
    "test_disruption_controls": 86,
    "test_consolidation": 58,
    "test_nodeclaims": 49,
    "test_fidelity": 43,
    "test_launch_health": 39,
    "test_static_capacity": 33,
    "test_live_metrics": 32,
    "test_explain": 26,
    "test_nodeoverlay": 20,
    "test_bind_race": 20,
    "test_capacity_reservations": 20,
    "test_localcluster": 18,
    "test_volume_limits": 17,
    "test_startup_taints": 13,
    "test_min_values_launch": 12,
    "test_instance_labels": 9,
    "test_disrupted_taint": 8,
}
UNLISTED_SECONDS = 5
STATE_ENV = "KARPY_CLUSTER_STATE"


def _name(path: str) -> str:
    return path[len(INTEGRATION) :].removesuffix(".py")


@cache
def _groups(workers: int) -> dict[str, int]:
    """The listed files' group numbers, balanced over `workers` groups."""
    load = [0] * max(workers, 1)
    groups: dict[str, int] = {}
    for name, seconds in sorted(SECONDS.items(), key=lambda item: (-item[1], item[0])):
        least = load.index(min(load))
        groups[name] = least
        load[least] += seconds
    return groups


def cluster_group(path: str, workers: int) -> str | None:
    """The group of a test file's tests, or None when they may go anywhere."""
    if path in WHOLE_FILES:
        return path
    if not path.startswith(INTEGRATION) or "/" in path[len(INTEGRATION) :] or path in OWN_CLUSTERS:
        return None
    # A shared running cluster (KARPY_CLUSTER_STATE) has one extender port: one worker uses it.
    if os.environ.get(STATE_ENV):
        return "cluster-1"
    # Unlisted (short, new) files join the first group: its worker starts a cluster anyway.
    return f"cluster-{_groups(workers).get(_name(path), 0) + 1}"


class ClusterGroups(LoadScopeScheduling):
    """LoadScopeScheduling whose scope is a file's cluster group, else the test itself."""

    _workers: int | None = None

    def _split_scope(self, nodeid: str) -> str:
        # The worker count when the run is split, kept: xdist shuts surplus workers down after the
        # split and asks the scope of each finished test again.
        if self._workers is None:
            self._workers = len(self.nodes) or 1
        return cluster_group(nodeid.split("::", 1)[0], self._workers) or nodeid
