"""karpy's nodes as solver input: in-flight capacity, limits usage, what the guard caches."""

from __future__ import annotations

from extender.api import labels as wk
from extender.provisioning import inventory


def node(name: str, prov: str = "default", **extra: object) -> dict:
    return {
        "metadata": {"name": name, "labels": {wk.PROVISIONER_NAME: prov, wk.INSTANCE_TYPE: "c5.xlarge"}},
        "spec": {"taints": [{"key": wk.NOT_READY_TAINT_KEY, "effect": "NoSchedule"}], **extra},
        "status": {
            "capacity": {"cpu": "4", "memory": "8Gi", "pods": "58"},
            "allocatable": {"cpu": "3900m", "memory": "7Gi", "pods": "58"},
        },
    }


def pod(cpu: str) -> dict:
    return {
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
    }


def test_in_flight_node_offers_its_room_without_the_not_ready_taint() -> None:
    inv = inventory.build([node("n1")], {"n1": [pod("1"), pod("500m")]}, marked={})
    (existing,) = inv.existing
    assert existing.taints == () and existing.pod_count == 2
    assert existing.requested.cpu == 1.5 and existing.allocatable.cpu == 3.9
    assert inv.usage["default"].cpu == 4 and inv.usage["default"].memory == 8 * 2**30


def test_marked_cordoned_and_deleting_nodes_count_for_limits_but_take_no_pods() -> None:
    deleting = node("n3")
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    inv = inventory.build([node("n1"), node("n2", unschedulable=True), deleting], {}, marked={"n1": "empty"})
    assert inv.existing == []
    assert inv.usage["default"].cpu == 12
    assert {n.name for n in inv.nodes} == {"n1", "n2", "n3"}


def test_inventory_names_the_pods_bound_to_karpy_nodes() -> None:
    bound = pod("1")
    bound["metadata"]["name"] = "bound"
    inv = inventory.build([node("n1"), node("n2")], {"n1": [bound], "n2": [pod("1")]}, marked={})
    assert inv.assigned == {"ns/bound", "ns/p"}
