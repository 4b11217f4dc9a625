"""Issue 31 on the local control plane: objects the webhook would refuse, stored straight into the
CRDs (the integration cluster installs the CRDs without karpy's webhook, as a webhook-less or
upgraded cluster holds them), never stall a worker, and a launch whose Node cannot be created is
not repeated.

karpy's provisioning and lifecycle run in this process (lifecycle_harness), the real kube-apiserver
refuses the Node (422, annotations past 256 KiB), moto stands for EC2.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
from kubernetes import client

from extender.api import labels as wk
from tests.integration import lifecycle_harness
from tests.integration.helpers import nodepool, pod_manifest, unique, wait_for
from tests.integration.lifecycle_harness import Karpy, bound_node, deployment, node_or_none

pytestmark = pytest.mark.integration

karpy = lifecycle_harness.karpy

#: How long the big pool's pod is watched after its first refused launch: within the 60 s backoff.
WATCH_SECONDS = 40.0


@pytest.fixture
def controller_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="karpy")
    return caplog


def pool_instances(karpy: Karpy, pool: str) -> list[dict[str, Any]]:
    found = karpy.ec2.describe_instances(Filters=[{"Name": f"tag:{wk.NODEPOOL}", "Values": [pool]}])
    return [i for r in found["Reservations"] for i in r["Instances"]]


def events_of(core: Any, kind: str, name: str, namespace: str = "default") -> list[Any]:
    """Events about an object (a cluster-scoped one's are in `default`, as karpy records them)."""
    selector = f"involvedObject.kind={kind},involvedObject.name={name}"
    return core.list_namespaced_event(namespace, field_selector=selector).items


def condition(kube: Any, pool: str, kind: str) -> dict[str, Any] | None:
    obj = client.CustomObjectsApi(kube).get_cluster_custom_object("karpenter.sh", "v1", "nodepools", pool)
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind), None)


def test_hostile_pools_are_isolated_and_a_refused_node_is_not_launched_again(
    karpy: Karpy, core_v1: Any, apps_v1: Any, namespace: str, controller_log: pytest.LogCaptureFixture
) -> None:
    cluster = karpy.settings.cluster_name
    on_demand = [{"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}]
    huge, plain, big = unique("np-huge"), unique("np-plain"), unique("np-big")
    # The CRD's pattern admits 99999999999h; Python's datetime cannot add it to a date.
    nodepool(
        karpy.kube,
        huge,
        cluster,
        on_demand,
        expireAfter="99999999999h",
        terminationGracePeriod="99999999999h",
    )
    nodepool(karpy.kube, plain, cluster, on_demand, empty_after="2s")
    nodepool(karpy.kube, big, cluster, on_demand, annotations={"example.com/big": "x" * 1_000_000})

    # A node of the huge-duration pool exists...
    deployment(apps_v1, namespace, "huge", huge, 1, owner_label=wk.NODEPOOL)
    huge_node = bound_node(core_v1, namespace, "huge")
    # ...while the big pool's pod waits for a node that cannot be created...
    core_v1.create_namespaced_pod(namespace, pod_manifest("big", "1", selector={wk.NODEPOOL: big}))
    refused = wait_for(lambda: events_of(core_v1, "NodePool", big), 60, "the big pool's LaunchFailed Event")
    refused_at = time.monotonic()
    assert refused[0].reason == "LaunchFailed" and "Too long" in refused[0].message
    first = pool_instances(karpy, big)
    assert len(first) == 1, f"{len(first)} instances launched for one pod"
    # ...and a plain pool's pod is bound and its emptied node removed meanwhile.
    deployment(apps_v1, namespace, "plain", plain, 1, owner_label=wk.NODEPOOL)
    plain_node = bound_node(core_v1, namespace, "plain")
    apps_v1.delete_namespaced_deployment("plain", namespace)
    wait_for(lambda: node_or_none(core_v1, plain_node) is None, 60, "the plain pool's emptied node removed")

    time.sleep(max(refused_at + WATCH_SECONDS - time.monotonic(), 0))
    instances = pool_instances(karpy, big)
    print(f"instances launched for the big pool's pod: {len(instances)}")
    assert len(instances) == 1, "launched again while backed off"
    gone = {"shutting-down", "terminated"}
    wait_for(lambda: instances_state(karpy, big) <= gone, 30, "the refused node's instance terminated")
    (big_pod,) = live_pods_named(core_v1, namespace, "big")
    assert not big_pod.spec.node_name
    assert [e.reason for e in events_of(core_v1, "NodePool", big)] == ["LaunchFailed"]
    assert any(e.reason == "LaunchFailed" for e in events_of(core_v1, "Pod", "big", namespace))
    health = wait_for(
        lambda: condition(karpy.kube, big, "NodeRegistrationHealthy"), 30, "the pool's condition"
    )
    assert (health["status"], health["reason"]) == ("False", "LaunchFailed")

    # A deleted node of the huge-duration pool still drains and loses its finalizer.
    apps_v1.delete_namespaced_deployment("huge", namespace)
    core_v1.delete_node(huge_node)
    wait_for(lambda: node_or_none(core_v1, huge_node) is None, 60, "the huge pool's deleted node gone")

    tracebacks = [r for r in controller_log.records if r.exc_info]
    assert tracebacks == [], [r.getMessage() for r in tracebacks]
    skipped = [r.getMessage() for r in controller_log.records if "Skipping node" in r.getMessage()]
    assert skipped == []
    for name in (huge, plain, big):
        client.CustomObjectsApi(karpy.kube).delete_cluster_custom_object(
            "karpenter.sh", "v1", "nodepools", name
        )


def instances_state(karpy: Karpy, pool: str) -> set[str]:
    return {i["State"]["Name"] for i in pool_instances(karpy, pool)}


def live_pods_named(core: Any, namespace: str, name: str) -> list[Any]:
    return [p for p in core.list_namespaced_pod(namespace).items if p.metadata.name == name]


def launch_errors(pool: str, code: str) -> float:
    from prometheus_client import REGISTRY

    found = REGISTRY.get_sample_value("karpy_launch_errors_total", {"provisioner": pool, "code": code})
    return found or 0.0


def test_an_ec2_refusal_for_good_backs_only_its_pool_off(
    karpy: Karpy, core_v1: Any, apps_v1: Any, namespace: str, controller_log: pytest.LogCaptureFixture
) -> None:
    """An EC2NodeClass with 60 tags (the CRD admits it, EC2 allows 50): moto refuses the launch with
    TagLimitExceeded. One refused launch, one Event and the condition on the pool; the pod waits
    without another try while backed off; another pool's pod is bound meanwhile."""
    cluster = karpy.settings.cluster_name
    on_demand = [{"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}]
    tagged, plain = unique("np-tags"), unique("np-plain")
    nodepool(karpy.kube, tagged, cluster, on_demand)
    nodepool(karpy.kube, plain, cluster, on_demand)
    client.CustomObjectsApi(karpy.kube).patch_cluster_custom_object(
        "karpenter.k8s.aws",
        "v1",
        "ec2nodeclasses",
        tagged,
        {"spec": {"tags": {f"team-{i}": "x" for i in range(60)}}},
    )
    core_v1.create_namespaced_pod(namespace, pod_manifest("tagged", "1", selector={wk.NODEPOOL: tagged}))
    refused = wait_for(
        lambda: events_of(core_v1, "NodePool", tagged), 60, "the tagged pool's LaunchFailed Event"
    )
    refused_at = time.monotonic()
    assert refused[0].reason == "LaunchFailed" and "TagLimitExceeded" in refused[0].message
    deployment(apps_v1, namespace, "plain", plain, 1, owner_label=wk.NODEPOOL)
    bound_node(core_v1, namespace, "plain")
    time.sleep(max(refused_at + WATCH_SECONDS - time.monotonic(), 0))
    tries = launch_errors(tagged, "TagLimitExceeded")
    print(f"launches refused with TagLimitExceeded in {WATCH_SECONDS:.0f}s: {tries:.0f}")
    assert tries == 1
    assert pool_instances(karpy, tagged) == []
    assert [e.reason for e in events_of(core_v1, "NodePool", tagged)] == ["LaunchFailed"]
    health = wait_for(lambda: condition(karpy.kube, tagged, "NodeRegistrationHealthy"), 30, "the condition")
    assert (health["status"], health["reason"]) == ("False", "LaunchFailed")
    assert [r for r in controller_log.records if r.exc_info] == []
    apps_v1.delete_namespaced_deployment("plain", namespace)
    for name in (tagged, plain):
        client.CustomObjectsApi(karpy.kube).delete_cluster_custom_object(
            "karpenter.sh", "v1", "nodepools", name
        )
