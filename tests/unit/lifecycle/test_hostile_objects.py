"""The probe of issue 31 as a property: hostile NodePools, EC2NodeClasses, NodeClaims and Nodes fed
to the controller's loaders and the node worker never raise out of a worker, never quarantine a
node karpy can read, and never stop the plain pool beside them.

Generated (Hypothesis): a valid NodePool with up to four fields replaced by values a careless or
hostile user stores with the webhook out of the path — durations past any clock, absurd budgets
and schedules, megabyte annotations, wrong types, arbitrary JSON — and EC2NodeClasses likewise;
then nodes of every pool that loaded (old, deleting, emptied, with hostile annotations and
timestamps at the end of the calendar) reconciled by the node worker on plain data.
"""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extender.api import labels, nodeclaim
from extender.cluster import pool_resources as kube_provisioners
from extender.lifecycle import gc
from tests import builders
from tests.builders import T0, node_manifest, stamp
from tests.unit.lifecycle.plainworld import PlainWorld

pytestmark = pytest.mark.slow

EXAMPLES = 100

NODE_CLASS: dict[str, Any] = {
    "apiVersion": "karpenter.k8s.aws/v1",
    "kind": "EC2NodeClass",
    "metadata": {"name": "default"},
    "spec": {
        "role": "r",
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "subnetSelectorTerms": [{"tags": {"a": "b"}}],
        "securityGroupSelectorTerms": [{"tags": {"a": "b"}}],
    },
}


def nodepool(name: str) -> dict[str, Any]:
    return builders.nodepool_manifest(name, resource_version="1", disruption={})


DURATIONS = st.sampled_from(
    ["99999999999h", "9223372036854775807s", "1e308h", "Never", "0s", "-5m", "1h", "9" * 400 + "s", "", "h"]
)
COUNTS = st.sampled_from(["9" * 5000, "9" * 5000 + "%", "250%", "0", "1", "abc", "", "-1", "10%"])
SCHEDULES = st.sampled_from(
    ["0 0 * * *", "1" * 5000 + " * * * *", "@daily", "* * * * * *", "0 0 31 2 *", "garbage", ""]
)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
HUGE_TEXT = st.sampled_from(["x" * 1_000_000, "y" * 262_145, "ok"])

#: (path into the NodePool, what to put there)
POOL_FIELDS: list[tuple[tuple[str, ...], st.SearchStrategy[Any]]] = [
    (("spec", "template", "spec", "expireAfter"), DURATIONS),
    (("spec", "template", "spec", "terminationGracePeriod"), DURATIONS),
    (("spec", "disruption", "consolidateAfter"), DURATIONS),
    (
        ("spec", "disruption", "consolidationPolicy"),
        st.sampled_from(["WhenEmpty", "WhenEmptyOrUnderutilized"]),
    ),
    (
        ("spec", "disruption", "budgets"),
        st.lists(
            st.fixed_dictionaries({"nodes": COUNTS}, optional={"schedule": SCHEDULES, "duration": DURATIONS}),
            max_size=3,
        ),
    ),
    (
        ("spec", "template", "metadata", "annotations"),
        st.dictionaries(st.sampled_from(["a", "b"]), HUGE_TEXT),
    ),
    (("spec", "template", "metadata", "labels"), JSON),
    (("spec", "template", "spec", "requirements"), JSON),
    (("spec", "template", "spec", "taints"), JSON),
    (("spec", "limits"), st.dictionaries(st.sampled_from(["cpu", "memory"]), COUNTS | JSON)),
    (("spec", "weight"), st.integers() | JSON),
    (("spec", "template", "spec", "kubelet"), JSON),
    (("spec",), JSON),
    (("metadata",), JSON),
]
CLASS_FIELDS: list[tuple[tuple[str, ...], st.SearchStrategy[Any]]] = [
    (("spec", "tags"), st.dictionaries(st.text(min_size=1, max_size=6), st.text(max_size=6), max_size=70)),
    (("spec", "userData"), HUGE_TEXT),
    (("spec", "blockDeviceMappings"), JSON),
    (("spec", "kubelet"), JSON),
    (("spec",), JSON),
]


def put(obj: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for key in path[:-1]:
        nxt = obj.get(key)
        if not isinstance(nxt, dict):
            nxt = obj[key] = {}
        obj = nxt
    obj[path[-1]] = value


@st.composite
def hostile(draw: st.DrawFn, base: dict[str, Any], fields: list[Any]) -> dict[str, Any]:
    obj = copy.deepcopy(base)
    for path, values in draw(st.lists(st.sampled_from(fields), min_size=1, max_size=4)):
        put(obj, path, draw(values))
    return obj


NODE_ANNOTATIONS = st.dictionaries(
    st.sampled_from([labels.EMPTINESS_TIMESTAMP_ANNOTATION, labels.DO_NOT_EVICT_ANNOTATION, "other"]),
    st.sampled_from(
        ["9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z", "garbage", "", stamp(T0), "x" * 300_000]
    ),
)


def node_of(name: str, pool: str, ages: int, deleting: bool, annotations: dict[str, str]) -> dict[str, Any]:
    manifest = node_manifest(
        name,
        created=T0 - timedelta(days=ages),
        provisioner=None,
        instance=f"i-{name}",
        deleting=deleting,
        annotations=annotations,
    )
    manifest["metadata"]["labels"][labels.NODEPOOL] = pool
    return manifest


def fuzz() -> settings:
    return settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )


@fuzz()
@given(
    pools=st.lists(hostile(nodepool("hostile"), POOL_FIELDS), min_size=1, max_size=3),
    classes=st.lists(hostile(NODE_CLASS, CLASS_FIELDS), max_size=2),
    nodes=st.lists(st.tuples(st.integers(0, 3650), st.booleans(), NODE_ANNOTATIONS), min_size=1, max_size=4),
)
def test_hostile_pools_and_nodes_never_escape_a_worker(
    monkeypatch_session: pytest.MonkeyPatch,
    pools: list[dict[str, Any]],
    classes: list[dict[str, Any]],
    nodes: list[tuple[int, bool, dict[str, str]]],
) -> None:
    for i, pool in enumerate(pools):
        if isinstance(pool.get("metadata"), dict):
            pool["metadata"]["name"] = f"hostile-{i}"
    plain = nodepool("plain")
    put(plain, ("spec", "disruption", "consolidationPolicy"), "WhenEmpty")
    put(plain, ("spec", "disruption", "consolidateAfter"), "30s")
    # Its budget never holds the emptied node (its deleting nodes would use up the default 10 %).
    put(plain, ("spec", "disruption", "budgets"), [{"nodes": "100%"}])
    loaded_classes = kube_provisioners.node_classes_of(classes, cluster_name="c")
    # The valid class wins the name: a hostile one of the same name is the loader's to refuse.
    loaded_classes.update(kube_provisioners.node_classes_of([NODE_CLASS], cluster_name="c"))
    loaded = kube_provisioners.nodepools_of([*pools, plain], loaded_classes)
    by_name = {p.name: p for p in loaded}
    assert "plain" in by_name  # the plain pool loads whatever sits beside it

    world = PlainWorld(monkeypatch_session, by_name)
    for i, (age, deleting, notes) in enumerate(nodes):
        for pool in by_name:
            world.add(node_of(f"{pool}-n{i}", pool, age, deleting, dict(notes)))
    emptied = world.add(
        node_of("plain-empty", "plain", 1, False, {labels.EMPTINESS_TIMESTAMP_ANNOTATION: stamp(T0)})
    )
    world.now = T0 + timedelta(minutes=5)
    world.worker._due()
    world.reconcile_all()
    assert world.worker.faults.names() == set()
    assert emptied in world.deleted


@fuzz()
@given(claims=st.lists(JSON | st.fixed_dictionaries({"metadata": JSON, "status": JSON}), max_size=5))
def test_hostile_nodeclaims_leave_garbage_collection_to_the_rest(
    monkeypatch_session: pytest.MonkeyPatch, claims: list[Any]
) -> None:
    good = {"metadata": {"name": "c1", "creationTimestamp": stamp(T0)}, "status": {"nodeName": "gone"}}
    monkeypatch_session.setattr(gc.nodeclaims, "list_claims", lambda _kube: [*claims, good])
    world = PlainWorld(monkeypatch_session, {})
    records = gc._claims(world.ctx)
    assert nodeclaim.Record.from_manifest(good) in records


@pytest.fixture(scope="module")
def monkeypatch_session() -> Any:
    """One patch set for every example (Hypothesis runs a test many times in one fixture scope)."""
    patch = pytest.MonkeyPatch()
    yield patch
    patch.undo()
