"""Issue 12's proofs on the local control plane + moto: consolidation with disruption budgets.

Provisioning, lifecycle (with the consolidation worker) and the extender run in this process, as in
test_lifecycle.py (its `karpy` fixture, with short consolidation timings). Nodes are spread on
purpose by cordoning each one before the next batch (provisioning packs onto existing nodes first),
then uncordoned, so consolidation finds a cluster it can shrink. Every wait is bounded.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from extender.api import labels as wk
from extender.cluster.cordon import cordon, uncordon
from tests.integration.helpers import unique, wait_for
from tests.integration.lifecycle_harness import (  # noqa: F401 (karpy is a fixture)
    Karpy,
    available,
    deployment,
    karpy,
    live_pods,
    messages,
    node_or_none,
    provisioner,
)
from tests.integration.observed import Objects, Observed, ready

pytestmark = pytest.mark.integration

TYPES = ["c5.large", "c5.xlarge", "c5.2xlarge"]
#: Launch + Ready on kwok, then the validation delay and a drain: generous, but bounded.
SETTLE = 180
#: No pod waits longer than a replacement's launch (seconds on kwok + moto).
PENDING_LIMIT = 30


@pytest.fixture(scope="module")
def fast(karpy: Karpy) -> Karpy:  # noqa: F811
    lifecycle = karpy.settings.lifecycle
    lifecycle.consolidation_interval_seconds = 1.0
    lifecycle.consolidation_validation_seconds = 2.0
    lifecycle.consolidation_min_node_age_seconds = 3.0
    return karpy


def consolidating(
    kube: Any,
    name: str,
    *,
    enabled: bool = True,
    budget: str = "10%",
    types: list[str] = TYPES,
    more: tuple[dict[str, Any], ...] = (),
    **spec: Any,
) -> None:
    """An on-demand Provisioner of `types` (`more` requirements, `spec` fields) with that budget."""
    provisioner(
        kube,
        name,
        [
            {"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
            {"key": wk.INSTANCE_TYPE, "operator": "In", "values": types},
            *more,
        ],
        consolidation={"enabled": enabled},
        disruption={"nodes": budget},
        **spec,
    )


def nodes_of(core: Any, prov: str, owner_label: str = wk.PROVISIONER_NAME) -> list[Any]:
    """The live nodes of `prov` (by `owner_label`: `karpenter.sh/nodepool` for a NodePool's)."""
    return [
        n
        for n in core.list_node(label_selector=f"{owner_label}={prov}").items
        if n.metadata.deletion_timestamp is None
    ]


def running_on(core: Any, namespace: str, app: str) -> dict[str, str]:
    """pod name -> node of the app's Running pods."""
    return {
        p.metadata.name: p.spec.node_name
        for p in live_pods(core, namespace, app)
        if p.spec.node_name and p.status.phase == "Running"
    }


def spread(
    core: Any, apps: Any, namespace: str, prov: str, app: str, per_node: int, nodes: int, cpu: str, **kw: Any
) -> list[str]:
    """`nodes` nodes holding `per_node` of the app's pods each: grow the deployment one node's worth
    at a time, cordoning each filled node so the next pods need a new one. The nodes are left
    cordoned (a later `spread` must not use them); `release` uncordons them."""
    filled: list[str] = []
    for i in range(nodes):
        count = per_node * (i + 1)
        if i == 0:
            deployment(apps, namespace, app, prov, count, cpu=cpu, **kw)
        else:
            apps.patch_namespaced_deployment_scale(app, namespace, {"spec": {"replicas": count}})
        placed = wait_for(
            lambda c=count: (r := running_on(core, namespace, app)) and len(r) == c and r,
            SETTLE,
            f"{count} pods",
        )
        new = sorted(set(placed.values()) - set(filled))
        assert len(new) == 1, f"expected one new node, got {new}"
        filled.append(new[0])
        cordon(core.api_client, new[0])
    return filled


def release(core: Any, names: list[str]) -> None:
    for name in names:
        uncordon(core.api_client, name)


def pdb_healthy(pods: Objects) -> int:
    return sum(1 for p in pods.values() if ready(p))


def cordoned(nodes: Objects) -> int:
    return sum(1 for n in nodes.values() if n.spec.unschedulable)


class Pending:
    """The longest any pod waited for a node: from its creation to the first event showing it bound,
    or until now while unbound (`figure` for Observed, with max). Pods bound before the watch
    started waited before it, not during the consolidation: they count 0."""

    def __init__(self) -> None:
        self.started = time.time()
        self.since: dict[str, float | None] = {}
        self.bound_at: dict[str, float] = {}

    def __call__(self, pods: Objects) -> int:
        now = time.time()
        for name, p in pods.items():
            created = p.metadata.creation_timestamp.timestamp()
            if name not in self.since:
                self.since[name] = None if p.spec.node_name and created < self.started else created
            if p.spec.node_name:
                self.bound_at.setdefault(name, now)
        waits = (self.bound_at.get(n, now) - s for n, s in self.since.items() if s is not None and n in pods)
        return int(max(waits, default=0.0))


@pytest.fixture
def observed() -> Iterator[list[Observed]]:
    started: list[Observed] = []
    yield started
    for o in started:
        o.close()


def price_of(harness: Karpy, nodes: list[Any]) -> float:
    catalog = {t.name: t for t in harness.cloud.get_instance_types(None)}
    total = 0.0
    for n in nodes:
        it = catalog[n.metadata.labels[wk.INSTANCE_TYPE]]
        total += min(o.price for o in it.offerings if o.capacity_type == "on-demand")
    return total


# -- proofs ----------------------------------------------------------------------------------------


def test_scale_down_consolidates_within_budget_and_pdb(
    fast: Karpy,
    core_v1: Any,
    apps_v1: Any,
    namespace: str,
    observed: list[Observed],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """(1) 12 pods on 3 nodes scaled to 3 -> fewer, cheaper nodes, every pod Running; (2) the PDB's
    minAvailable holds throughout; (4) budget 1 -> never more than one node cordoned at a time."""
    caplog.set_level("INFO", logger="karpy")
    prov = unique("shrink")
    consolidating(fast.kube, prov, budget="1")
    client.PolicyV1Api(fast.kube).create_namespaced_pod_disruption_budget(
        namespace,
        {
            "metadata": {"name": "web"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
        },
    )
    # No node is old enough to consolidate while the spread is being built.
    fast.settings.lifecycle.consolidation_min_node_age_seconds = 3600
    first = spread(core_v1, apps_v1, namespace, prov, "web", 4, 3, "1800m")
    release(core_v1, first)
    before = nodes_of(core_v1, prov)
    assert sorted(n.metadata.name for n in before) == sorted(first)
    price_before = price_of(fast, before)
    apps_v1.patch_namespaced_deployment_scale("web", namespace, {"spec": {"replicas": 3}})
    wait_for(
        lambda: (
            len(running_on(core_v1, namespace, "web")) == 3 and len(live_pods(core_v1, namespace, "web")) == 3
        ),
        60,
        "scaled to 3",
    )
    web = {"namespace": namespace, "label_selector": "app=web"}
    karpy_nodes = {"label_selector": f"{wk.PROVISIONER_NAME}={prov}"}
    observed.append(Observed(core_v1.list_namespaced_pod, pdb_healthy, min, **web))
    observed.append(Observed(core_v1.list_node, cordoned, max, **karpy_nodes))
    observed.append(Observed(core_v1.list_namespaced_pod, Pending(), max, **web))
    fast.settings.lifecycle.consolidation_min_node_age_seconds = 3.0

    def settled() -> Any:
        nodes = nodes_of(core_v1, prov)
        return len(nodes) < 3 and len(running_on(core_v1, namespace, "web")) == 3 and nodes

    after = wait_for(settled, SETTLE, "fewer nodes with every pod Running")
    # let a last drain finish, then check the steady state
    wait_for(lambda: available(core_v1, namespace, "web") == 3, 60, "3 web pods available")
    assert price_of(fast, nodes_of(core_v1, prov)) < price_before
    min_available, max_cordoned, pending = (o.stop() for o in observed)
    # Pods displaced onto the remaining nodes wait for kube-scheduler only, never for a launch.
    assert pending is not None and pending <= PENDING_LIMIT, f"a pod was pending {pending}s"
    assert min_available is not None and min_available >= 2, f"PDB minAvailable 2 violated: {min_available}"
    # Exactly 1: the watch saw the drain's cordon (it is not blind), and never two at once.
    assert max_cordoned == 1, f"{max_cordoned} nodes cordoned at once (budget 1)"
    assert any(m.startswith("Consolidating ") and "$" in m and "→" in m for m in messages(caplog)), messages(
        caplog
    )
    assert after


def test_protected_nodes_and_disabled_provisioner_are_untouched(
    fast: Karpy, core_v1: Any, apps_v1: Any, namespace: str
) -> None:
    """(3) a do-not-consolidate node and a node with a do-not-evict pod stay, while an ordinary node
    beside them is consolidated; (5) with consolidation disabled nothing happens."""
    on, off = unique("guard"), unique("off")
    fast.settings.lifecycle.consolidation_min_node_age_seconds = 3600
    consolidating(fast.kube, on, budget="100%")
    consolidating(fast.kube, off, enabled=False)
    guarded = spread(core_v1, apps_v1, namespace, on, "keep", 1, 1, "500m")[0]
    pinned = spread(
        core_v1, apps_v1, namespace, on, "pin", 1, 1, "500m", annotations={wk.DO_NOT_EVICT_ANNOTATION: "true"}
    )[0]
    ordinary = spread(core_v1, apps_v1, namespace, on, "plain", 1, 1, "500m")[0]
    idle = spread(core_v1, apps_v1, namespace, off, "idle", 1, 2, "500m")
    core_v1.patch_node(guarded, {"metadata": {"annotations": {wk.DO_NOT_CONSOLIDATE_ANNOTATION: "true"}}})
    release(core_v1, [guarded, pinned, ordinary, *idle])
    fast.settings.lifecycle.consolidation_min_node_age_seconds = 3.0
    wait_for(lambda: node_or_none(core_v1, ordinary) is None, SETTLE, "the ordinary node consolidated away")
    wait_for(lambda: len(running_on(core_v1, namespace, "plain")) == 1, 60, "its pod Running elsewhere")
    # Several more passes (1 s interval, 2 s validation) must leave the rest alone.
    time.sleep(8)
    for name in (guarded, pinned, *idle):
        node = node_or_none(core_v1, name)
        assert node is not None and node.metadata.deletion_timestamp is None, f"{name} was disrupted"
        assert not node.spec.unschedulable, f"{name} was cordoned"
    assert len(running_on(core_v1, namespace, "idle")) == 2


def test_failed_replacement_launch_leaves_the_old_node_serving(
    fast: Karpy, core_v1: Any, apps_v1: Any, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """(6) a replacement EC2 refuses leaves the old node serving; once EC2 accepts, the node is
    replaced by a cheaper one that was Ready before the drain."""
    caplog.set_level("INFO", logger="karpy")
    prov = unique("replace")
    fast.settings.lifecycle.consolidation_min_node_age_seconds = 3600
    consolidating(fast.kube, prov, budget="100%", types=["c5.large", "c5.2xlarge"])
    big = spread(core_v1, apps_v1, namespace, prov, "solo", 4, 1, "1800m")[0]
    release(core_v1, [big])
    assert core_v1.read_node(big).metadata.labels[wk.INSTANCE_TYPE] == "c5.2xlarge"
    apps_v1.patch_namespaced_deployment_scale("solo", namespace, {"spec": {"replicas": 1}})
    wait_for(lambda: len(live_pods(core_v1, namespace, "solo")) == 1, 60, "scaled to 1")
    refused: list[str] = []

    def refuse_all(parsed: dict, **_: Any) -> None:
        for item in parsed.get("Instances") or []:
            fast.ec2.terminate_instances(InstanceIds=item["InstanceIds"])
            refused.append(item["LaunchTemplateAndOverrides"]["Overrides"]["InstanceType"])
            parsed.setdefault("Errors", []).append(
                {
                    "ErrorCode": "InsufficientInstanceCapacity",
                    "ErrorMessage": "injected",
                    "LaunchTemplateAndOverrides": item["LaunchTemplateAndOverrides"],
                    "Lifecycle": "on-demand",
                }
            )
        parsed["Instances"] = []

    fast.ec2.meta.events.register("after-call.ec2.CreateFleet", refuse_all)
    try:
        fast.settings.lifecycle.consolidation_min_node_age_seconds = 3.0
        wait_for(
            # Not the validation's "decision changed" abandonment: the failed launch's.
            lambda: any("launching the replacement failed" in m for m in messages(caplog)),
            SETTLE,
            "abandoned replacement",
        )
    finally:
        fast.ec2.meta.events.unregister("after-call.ec2.CreateFleet", refuse_all)
    assert refused
    node = wait_for(
        lambda: (n := node_or_none(core_v1, big)) and not n.spec.unschedulable and n, 30, "uncordoned"
    )
    assert node.metadata.deletion_timestamp is None
    assert list(running_on(core_v1, namespace, "solo").values()) == [big]
    # EC2 accepts again. The refused offerings stay out of plans for 3 minutes (both ICE caches);
    # forget them so the proof does not wait that long.
    fast.controller.unavailable.clear()
    with fast.cloud._unavailable_lock:
        fast.cloud._unavailable.clear()
    # The replacement launches, is Ready, and only then is the old node drained.
    wait_for(lambda: node_or_none(core_v1, big) is None, SETTLE, "old node replaced")
    placed = wait_for(lambda: running_on(core_v1, namespace, "solo"), 60, "pod Running on the replacement")
    new = core_v1.read_node(next(iter(placed.values())))
    assert new.metadata.labels[wk.INSTANCE_TYPE] == "c5.large"
    log = messages(caplog)
    ready_at = next(i for i, m in enumerate(log) if m.startswith("Replacement node(s)") and big in m)
    assert any(m == f"Deleted node {big}" for m in log[ready_at:])
