"""NodeOverlays live on the local control plane (real API server, kube-scheduler, kwok; moto for EC2),
the CRD as installed by the chart: the controller's informer picks them up, its batches plan with
them, and the leader writes their status.

- Price: a NodePool of c5.large ($0.085/h in the built-in table) and m5.large ($0.096/h) launches
  c5.large for a 1-CPU pod; with a NodeOverlay setting m5.large's price to $0.01 for that pool,
  the next pod gets m5.large ("Launched instance: ... type: m5.large").
- Capacity: a pod requesting `example.com/widget: 2` fits no node until an overlay gives the
  pool's type `example.com/widget: 4`; then karpy launches a node whose Node carries the widgets
  in capacity and allocatable, and the pod is bound there.
- Hugepages: a pod requesting `hugepages-2Mi` (requests == limits, as Kubernetes requires) gets
  karpy's FailedProvisioning and no node while no instance type lists hugepages; an overlay giving
  the pool's type `hugepages-2Mi: 1Gi` (Karpenter's NodeOverlay capacity example) lets the same pod
  get a node carrying it.
- Conflict: two overlays of one weight pricing the same offering: the later in Karpenter's
  precedence (name earlier in the alphabet) gets ValidationSucceeded=False, reason Conflict.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from kubernetes.utils import parse_quantity

from extender.api import labels as wk
from tests.integration import lifecycle_harness
from tests.integration.helpers import nodepool, unique, wait_for
from tests.integration.lifecycle_harness import Karpy, deployment, live_pods

pytestmark = pytest.mark.integration

karpy = lifecycle_harness.karpy

TYPE = "node.kubernetes.io/instance-type"
ON_DEMAND = {"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}


def overlay(kube: Any, name: str, spec: dict[str, Any]) -> None:
    from kubernetes import client

    client.CustomObjectsApi(kube).create_cluster_custom_object(
        "karpenter.sh",
        "v1alpha1",
        "nodeoverlays",
        {
            "apiVersion": "karpenter.sh/v1alpha1",
            "kind": "NodeOverlay",
            "metadata": {"name": name},
            "spec": spec,
        },
    )


def delete_overlay(kube: Any, name: str) -> None:
    from kubernetes import client

    client.CustomObjectsApi(kube).delete_cluster_custom_object(
        "karpenter.sh", "v1alpha1", "nodeoverlays", name
    )


def m5_pool(karpy: Karpy, prefix: str, **fields: Any) -> str:
    """A NodePool of on-demand m5.large only; its name."""
    pool = unique(prefix)
    nodepool(
        karpy.kube,
        pool,
        karpy.settings.cluster_name,
        [ON_DEMAND, {"key": TYPE, "operator": "In", "values": ["m5.large"]}],
        **fields,
    )
    return pool


def capacity_overlay(karpy: Karpy, name: str, pool: str, capacity: dict[str, str]) -> None:
    """An overlay adding `capacity` to every type of NodePool `pool`."""
    overlay(
        karpy.kube,
        name,
        {"requirements": [{"key": wk.NODEPOOL, "operator": "In", "values": [pool]}], "capacity": capacity},
    )


def watched(karpy: Karpy, name: str) -> None:
    wait_for(
        lambda: name in [o.name for o in karpy.controller.overlays.index.current()],
        30,
        f"overlay {name} watched",
    )


def launched_types(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage().split("type: ")[1].split(",")[0]
        for r in caplog.records
        if r.getMessage().startswith("Launched instance:")
    ]


def node_of(core_v1: Any, namespace: str, app: str) -> Any:
    name = wait_for(
        lambda: (ps := live_pods(core_v1, namespace, app)) and ps[0].spec.node_name,
        60,
        f"the {app} pod bound",
    )
    return core_v1.read_node(name)


def test_a_price_overlay_changes_the_type_karpy_launches(
    karpy: Karpy, core_v1: Any, apps_v1: Any, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="extender.cloud.aws.provider")
    pool = unique("np-ov-price")
    nodepool(
        karpy.kube,
        pool,
        karpy.settings.cluster_name,
        [ON_DEMAND, {"key": TYPE, "operator": "In", "values": ["c5.large", "m5.large"]}],
        empty_after="5s",
    )
    deployment(apps_v1, namespace, "before", pool, 1, owner_label=wk.NODEPOOL)
    before = node_of(core_v1, namespace, "before")
    assert before.metadata.labels[TYPE] == "c5.large"
    assert launched_types(caplog) == ["c5.large"]

    cut = unique("savings-plan")
    overlay(
        karpy.kube,
        cut,
        {
            "requirements": [
                {"key": TYPE, "operator": "In", "values": ["m5.large"]},
                {"key": wk.NODEPOOL, "operator": "In", "values": [pool]},
            ],
            "price": "0.01",
        },
    )
    try:
        watched(karpy, cut)
        deployment(apps_v1, namespace, "after", pool, 1, owner_label=wk.NODEPOOL)
        after = node_of(core_v1, namespace, "after")
        assert after.metadata.labels[TYPE] == "m5.large"
        assert launched_types(caplog) == ["c5.large", "m5.large"]
    finally:
        delete_overlay(karpy.kube, cut)


def test_a_capacity_overlay_lets_a_pod_requesting_it_get_a_node(
    karpy: Karpy, core_v1: Any, namespace: str
) -> None:
    pool = m5_pool(karpy, "np-ov-widget", empty_after="5s")
    widgets = unique("widgets")
    capacity_overlay(karpy, widgets, pool, {"example.com/widget": "4"})
    try:
        watched(karpy, widgets)
        resources = {
            "requests": {"cpu": "500m", "example.com/widget": "2"},
            "limits": {"example.com/widget": "2"},
        }
        pod_requesting(core_v1, namespace, "widget", pool, resources)
        node = node_of(core_v1, namespace, "widget")
        assert node.metadata.labels[wk.NODEPOOL] == pool
        assert node.status.capacity["example.com/widget"] == "4"
        assert node.status.allocatable["example.com/widget"] == "4"
    finally:
        delete_overlay(karpy.kube, widgets)


def pod_requesting(core_v1: Any, namespace: str, name: str, pool: str, resources: dict[str, Any]) -> None:
    core_v1.create_namespaced_pod(
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": name}},
            "spec": {
                "terminationGracePeriodSeconds": 0,
                "nodeSelector": {wk.NODEPOOL: pool},
                "containers": [
                    {"name": "pause", "image": "registry.k8s.io/pause:3.9", "resources": resources}
                ],
            },
        },
    )


def test_a_hugepages_overlay_lets_a_pod_requesting_hugepages_get_a_node(
    karpy: Karpy, core_v1: Any, namespace: str
) -> None:
    pool = m5_pool(karpy, "np-ov-huge", empty_after="5s")
    # Hugepages requests must equal limits and come with cpu or memory (Kubernetes pod validation).
    amounts = {"cpu": "500m", "memory": "256Mi", "hugepages-2Mi": "128Mi"}
    pod_requesting(core_v1, namespace, "huge", pool, {"requests": amounts, "limits": amounts})

    def failed() -> list[Any]:
        events = core_v1.list_namespaced_event(namespace, field_selector="reason=FailedProvisioning").items
        return [e for e in events if e.involved_object.name == "huge"]

    refused = wait_for(failed, 30, "FailedProvisioning for the hugepages pod")
    assert "hugepages-2Mi" in refused[0].message, refused[0].message
    print(f"without the overlay: FailedProvisioning {refused[0].message!r}")
    assert not core_v1.list_node(label_selector=f"{wk.NODEPOOL}={pool}").items, "a node without hugepages"
    assert not live_pods(core_v1, namespace, "huge")[0].spec.node_name

    huge = unique("hugepages")
    capacity_overlay(karpy, huge, pool, {"hugepages-2Mi": "1Gi"})
    try:
        watched(karpy, huge)
        node = node_of(core_v1, namespace, "huge")
        assert node.metadata.labels[wk.NODEPOOL] == pool
        # karpy writes byte counts other than memory as plain numbers ("1073741824"): equal quantities.
        assert parse_quantity(node.status.capacity["hugepages-2Mi"]) == parse_quantity("1Gi")
        assert parse_quantity(node.status.allocatable["hugepages-2Mi"]) == parse_quantity("1Gi")
    finally:
        delete_overlay(karpy.kube, huge)


def test_equal_weight_overlays_on_one_offering_report_a_conflict(karpy: Karpy) -> None:
    from kubernetes import client

    pool = m5_pool(karpy, "np-ov-conflict")
    suffix = unique("x")
    first, second = f"a-{suffix}", f"b-{suffix}"
    for name in (first, second):
        overlay(
            karpy.kube,
            name,
            {
                "requirements": [{"key": wk.NODEPOOL, "operator": "In", "values": [pool]}],
                "priceAdjustment": "-10%",
            },
        )
    api = client.CustomObjectsApi(karpy.kube)

    def conditions(name: str) -> dict[str, dict[str, Any]] | None:
        obj = api.get_cluster_custom_object("karpenter.sh", "v1alpha1", "nodeoverlays", name)
        found = {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}
        return found if "ValidationSucceeded" in found else None

    try:
        # "b-..." comes first in Karpenter's precedence (equal weights: the later name), "a-..." conflicts.
        lost = wait_for(lambda: conditions(first), 30, "the conflicting overlay's status")
        assert lost["ValidationSucceeded"]["status"] == "False"
        assert lost["ValidationSucceeded"]["reason"] == "Conflict"
        assert lost["ValidationSucceeded"]["message"] == "conflict with another overlay"
        assert lost["Ready"]["status"] == "False" and lost["Ready"]["reason"] == "Conflict"
        kept = wait_for(lambda: conditions(second), 30, "the applied overlay's status")
        assert kept["ValidationSucceeded"]["status"] == "True" and kept["Ready"]["status"] == "True"
    finally:
        for name in (first, second):
            delete_overlay(karpy.kube, name)
