"""Launch health on the local control plane + moto (issue 35): a NodePool whose EC2NodeClass's
securityGroupSelectorTerms match no security group cannot launch. What karpy does, live:

- the first launch for it fails (`NoSecurityGroups`, before any CreateFleet) and backs the pool
  off (provisioning/backoff.py: 60 s, doubling), with ONE Warning Event on the NodePool (reason
  LaunchFailed) and its NodeRegistrationHealthy=False, however many batches its pods go through
  meanwhile: pods keep arriving for ~30 s, one batch each, and no further launch is tried;
- the status pass (cluster/v1status.py, run every minute by `karpy controller`) reports the cause
  as Karpenter v1 names it: the EC2NodeClass SecurityGroupsReady=False (SecurityGroupsNotFound)
  and Ready=False, the NodePool NodeClassReady=False and Ready=False; one condition of each type;
- another NodePool's pod gets its node and is bound while the first is backed off.

Launch attempts are counted twice: karpy's `karpy_launch_errors_total` for the pool, and the
CreateFleet calls boto sends to moto (a `before-parameter-build` hook on the provider's EC2 client), by the
nodepool tag they carry. (Karpenter itself skips a NodePool whose node class is not Ready, so it
tries no launch at all; karpy tries once and backs off.)
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from prometheus_client import REGISTRY

from extender.api import labels as wk
from extender.cluster import v1status
from tests.integration import lifecycle_harness
from tests.integration.helpers import nodepool, pod_manifest, unique, wait_for
from tests.integration.lifecycle_harness import Karpy

pytestmark = pytest.mark.integration

karpy = lifecycle_harness.karpy

ON_DEMAND = [{"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}]
NO_SUCH_GROUP = [{"tags": {"karpy.test/no-such-group": "true"}}]
#: How long pods keep arriving for the backed-off pool, one every PACE seconds.
WINDOW_SECONDS = 30.0
PACE = 3.0


@pytest.fixture
def fleets(karpy: Karpy) -> Iterator[Counter[str]]:
    """CreateFleet calls sent to moto from now on, by their nodepool tag."""
    sent: Counter[str] = Counter()

    def count(params: dict[str, Any], **_: Any) -> None:
        tags = [t for spec in params.get("TagSpecifications") or [] for t in spec.get("Tags") or []]
        sent[next((t["Value"] for t in tags if t["Key"] == wk.NODEPOOL), "")] += 1

    events = karpy.ec2.meta.events
    events.register("before-parameter-build.ec2.CreateFleet", count, unique_id="launch-health-fleets")
    try:
        yield sent
    finally:
        events.unregister("before-parameter-build.ec2.CreateFleet", unique_id="launch-health-fleets")


def pool_events(core: Any, name: str) -> list[Any]:
    found = core.list_event_for_all_namespaces(field_selector=f"involvedObject.name={name}").items
    return [e for e in found if e.involved_object.kind == "NodePool"]


def conditions(kube: Any, group: str, plural: str, name: str) -> list[dict[str, Any]]:
    obj = client.CustomObjectsApi(kube).get_cluster_custom_object(group, "v1", plural, name)
    return list((obj.get("status") or {}).get("conditions") or [])


def by_type(found: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    types = [c["type"] for c in found]
    assert len(types) == len(set(types)), f"a condition type written twice: {types}"
    return {c["type"]: c for c in found}


def launch_errors(pool: str) -> float:
    labels = {"provisioner": pool, "code": "NoSecurityGroups"}
    return REGISTRY.get_sample_value("karpy_launch_errors_total", labels) or 0.0


def delete_pools(kube: Any, *names: str) -> None:
    objects = client.CustomObjectsApi(kube)
    for name in names:
        objects.delete_cluster_custom_object("karpenter.sh", "v1", "nodepools", name)
        objects.delete_cluster_custom_object("karpenter.k8s.aws", "v1", "ec2nodeclasses", name)


def test_a_pool_matching_no_security_group_backs_off_and_others_launch(
    karpy: Karpy,
    core_v1: Any,
    namespace: str,
    fleets: Counter[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="karpy.controller.provisioning")
    cluster = karpy.settings.cluster_name
    bad, good = unique("np-nosg"), unique("np-ok")
    nodepool(karpy.kube, bad, cluster, ON_DEMAND, security_groups=NO_SUCH_GROUP)
    nodepool(karpy.kube, good, cluster, ON_DEMAND)
    try:
        started = time.monotonic()
        core_v1.create_namespaced_pod(namespace, pod_manifest("stuck-0", "500m", selector={wk.NODEPOOL: bad}))
        failed = wait_for(
            lambda: [e for e in pool_events(core_v1, bad) if e.reason == "LaunchFailed"],
            30,
            "the NodePool's LaunchFailed Event",
        )
        assert "no security groups exist given constraints" in failed[0].message, failed[0].message
        assert failed[0].type == "Warning"

        # Pods keep coming for the backed-off pool, each in a batch of its own; the other pool's
        # pod arrives fourth and must not wait on it (even when a slow Event on a loaded machine
        # leaves the window too short for four arrivals: its pod was then never created).
        arrivals = 1
        while time.monotonic() - started < WINDOW_SECONDS or arrivals < 4:
            time.sleep(PACE)
            stuck = pod_manifest(f"stuck-{arrivals}", "500m", selector={wk.NODEPOOL: bad})
            core_v1.create_namespaced_pod(namespace, stuck)
            arrivals += 1
            if arrivals == 4:
                core_v1.create_namespaced_pod(
                    namespace, pod_manifest("fine", "500m", selector={wk.NODEPOOL: good})
                )
        node = wait_for(
            lambda: core_v1.read_namespaced_pod("fine", namespace).spec.node_name,
            60,
            "the other pool's pod bound",
        )
        assert core_v1.read_node(node).metadata.labels[wk.NODEPOOL] == good
        time.sleep(2 * PACE)  # the last arrival's batch

        held = [m for m in (r.getMessage() for r in caplog.records) if m.startswith("Not launching")]
        nodepool_events = [e for e in pool_events(core_v1, bad) if e.reason == "LaunchFailed"]
        attempts = launch_errors(bad)
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        print(
            f"launch health: {arrivals} pods over {time.monotonic() - started:.0f}s, {attempts:.0f} launch"
            f" attempt(s), {fleets[bad]} CreateFleet for {bad}, {fleets[good]} for {good},"
            f" {len(held)} batch(es) held, {len(nodepool_events)} NodePool Event(s) (load {load})"
        )
        assert attempts == 1, "launched again while backed off"
        assert fleets[bad] == 0  # the security groups are resolved before CreateFleet
        assert fleets[good] == 1
        assert held, "no batch met the backoff: the arrivals did not reach a launch"
        assert len(nodepool_events) == 1 and (nodepool_events[0].count or 1) == 1, nodepool_events
        assert not core_v1.list_node(label_selector=f"{wk.NODEPOOL}={bad}").items
        pods = core_v1.list_namespaced_pod(namespace, label_selector="app=inflate").items
        assert not [p.metadata.name for p in pods if p.metadata.name.startswith("stuck") and p.spec.node_name]

        registration = by_type(conditions(karpy.kube, "karpenter.sh", "nodepools", bad))
        assert registration[v1status.REGISTRATION_HEALTHY]["status"] == "False"
        assert registration[v1status.REGISTRATION_HEALTHY]["reason"] == "LaunchFailed"

        # The status pass, twice: the conditions it writes are not duplicated, and it keeps
        # NodeRegistrationHealthy.
        for _ in range(2):
            v1status.refresh(karpy.kube, karpy.cloud.node_class_status, karpy.settings)
        node_class = by_type(conditions(karpy.kube, "karpenter.k8s.aws", "ec2nodeclasses", bad))
        assert node_class["SecurityGroupsReady"]["status"] == "False"
        assert node_class["SecurityGroupsReady"]["reason"] == "SecurityGroupsNotFound"
        assert node_class["Ready"]["status"] == "False"
        assert node_class["SubnetsReady"]["status"] == "True"
        pool = by_type(conditions(karpy.kube, "karpenter.sh", "nodepools", bad))
        assert pool["NodeClassReady"]["status"] == "False" and pool["Ready"]["status"] == "False"
        assert pool[v1status.REGISTRATION_HEALTHY]["status"] == "False"
        healthy = by_type(conditions(karpy.kube, "karpenter.sh", "nodepools", good))
        assert healthy["Ready"]["status"] == "True"
        assert healthy.get(v1status.REGISTRATION_HEALTHY, {"status": "True"})["status"] == "True"
    finally:
        delete_pools(karpy.kube, bad, good)
