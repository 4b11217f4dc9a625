"""How pytest-xdist hands out the tests (`-n 2 --dist loadgroup`, pyproject's addopts): the
integration files on the session's local control plane in two groups, each run by one worker on its
own cluster (session fixtures are per worker), in collection order; test_image.py's tests together
(one image build); every other test alone, to whichever worker is free.

xdist's own loadgroup reads `xdist_group` marks into node ids, which pytest 9's node ids no longer
take; so the groups are told by file here (`pytest_xdist_make_scheduler` in tests/conftest.py).
"""

from __future__ import annotations

import os

from xdist.scheduler import LoadScopeScheduling

INTEGRATION = "tests/integration/"
#: Integration files that start clusters of their own: spread test by test.
OWN_CLUSTERS = frozenset(f"{INTEGRATION}{name}.py" for name in ("test_demo", "test_extender_tls"))
#: Files whose tests share a module fixture that must not run on both workers at once (the image
#: build, when `make image` has not built it yet): one group each, on a worker of its own choosing.
WHOLE_FILES = frozenset({f"{INTEGRATION}test_image.py"})
#: The files on the second worker's cluster (the other `cluster` files run on the first), chosen
#: from `pytest --durations` so that the two take about as long.
SECOND_CLUSTER = frozenset(
    f"{INTEGRATION}{name}.py"
    for name in (
        "test_chaos",
        "test_disruption_controls",
        "test_drift",
        "test_isolation",
        "test_lifecycle",
        "test_disrupted_taint",
        "test_node_repair",
        "test_static_capacity",
    )
)
STATE_ENV = "KARPY_CLUSTER_STATE"


def cluster_group(path: str) -> str | None:
    """The group of a test file's tests, or None when they may go anywhere."""
    if path in WHOLE_FILES:
        return path
    if not path.startswith(INTEGRATION) or "/" in path[len(INTEGRATION) :] or path in OWN_CLUSTERS:
        return None
    # A shared running cluster (KARPY_CLUSTER_STATE) has one extender port: one worker uses it.
    if path in SECOND_CLUSTER and not os.environ.get(STATE_ENV):
        return "cluster-2"
    return "cluster-1"


class ClusterGroups(LoadScopeScheduling):
    """LoadScopeScheduling whose scope is a file's cluster group, else the test itself."""

    def _split_scope(self, nodeid: str) -> str:
        return cluster_group(nodeid.split("::", 1)[0]) or nodeid
