"""Every node of the cluster as solver input: karpy's take pods, the others only count for topology;
limits usage and the guard's cache stay karpy's."""

from __future__ import annotations

from extender.api import labels as wk
from extender.api.node import Node
from extender.cluster import inventory
from extender.cluster.boundpods import group
from tests import builders


def node(name: str, prov: str | None = "default", **extra: object) -> dict:
    manifest = builders.node_manifest(
        name,
        provisioner=prov,
        instance=None,
        ready=None,
        labels={wk.INSTANCE_TYPE: "c5.xlarge", wk.ZONE: "us-west-2a"},
        taints=[{"key": wk.NOT_READY_TAINT_KEY, "effect": "NoSchedule"}],
        capacity={"cpu": "4", "memory": "8Gi", "pods": "58"},
        allocatable={"cpu": "3900m", "memory": "7Gi", "pods": "58"},
    )
    manifest["spec"].update(extra)
    return manifest


def models(*manifests: dict) -> list[Node]:
    """Nodes as the cluster adapter hands them over: parsed."""
    return [Node.from_manifest(m) for m in manifests]


def pod(cpu: str, on: str = "n1", name: str = "p", phase: str = "Running", **labels: str) -> dict:
    return builders.pod_manifest(
        name, namespace="ns", uid="", labels=labels, image=None, node_name=on, cpu=cpu, phase=phase
    )


def test_in_flight_node_offers_its_room_without_its_start_up_taints() -> None:
    starting = node("n1")
    starting["spec"]["taints"] += [
        {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
        {"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"},
    ]
    inv = inventory.build(models(starting), group([pod("1", name="a"), pod("500m", name="b")]), marked={})
    (existing,) = inv.existing
    assert existing.taints == () and existing.pod_count == 2 and existing.schedulable
    assert existing.requested.cpu == 1.5 and existing.allocatable.cpu == 3.9
    assert {p.key for p in existing.pods} == {"ns/a", "ns/b"}
    assert inv.usage["default"].cpu == 4 and inv.usage["default"].memory == 8 * 2**30


def test_marked_cordoned_and_deleting_nodes_count_for_limits_and_topology_but_take_no_pods() -> None:
    deleting = node("n3")
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    inv = inventory.build(
        models(node("n1"), node("n2", unschedulable=True), deleting),
        group([pod("1", on="n2", app="web")]),
        marked={"n1": "empty"},
    )
    assert [(n.name, n.schedulable) for n in inv.existing] == [("n1", False), ("n2", False), ("n3", False)]
    assert inv.existing[1].pods[0].labels == {"app": "web"}
    assert inv.usage["default"].cpu == 12
    assert {n.name for n in inv.nodes} == {"n1", "n2", "n3"}


def test_other_nodes_bring_pods_and_taints_but_no_usage_and_no_cache_entry() -> None:
    theirs = node("ng-1", prov=None)
    theirs["spec"]["taints"] += [
        {"key": "dedicated", "value": "db", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
    ]
    inv = inventory.build(models(theirs, node("n1")), group([pod("2", on="ng-1", app="db")]), marked={})
    other = next(n for n in inv.existing if n.name == "ng-1")
    assert not other.schedulable and other.provisioner == ""
    # Start-up taints are dropped only from karpy's nodes.
    assert {t.key for t in other.taints} == {
        wk.NOT_READY_TAINT_KEY,
        "dedicated",
        "node.kubernetes.io/not-ready",
    }
    assert [p.key for p in other.pods] == ["ns/p"] and other.requested.cpu == 2
    assert set(inv.usage) == {"default"}
    assert [n.name for n in inv.nodes] == ["n1"]


def test_terminal_and_unparseable_bound_pods() -> None:
    bad = pod("1x", name="bad")
    done = pod("1", name="done", phase="Succeeded")
    inv = inventory.build(models(node("n1")), group([pod("1", name="ok"), bad, done]), marked={})
    (existing,) = inv.existing
    # A pod karpy cannot read still takes a pod slot; a finished one takes nothing.
    assert [p.key for p in existing.pods] == ["ns/ok"] and existing.pod_count == 2
    assert existing.requested.cpu == 1


def test_inventory_names_the_pods_bound_to_any_node_and_keeps_namespaces() -> None:
    inv = inventory.build(
        models(node("n1"), node("x", prov=None)),
        group([pod("1", on="n1", name="bound"), pod("1", on="x", name="p"), pod("1", on="gone", name="q")]),
        marked={},
        namespaces={"ns": {"team": "a"}},
    )
    assert inv.assigned == {"ns/bound", "ns/p", "ns/q"}
    assert inv.namespaces == {"ns": {"team": "a"}}


def test_usage_counts_karpy_nodes_only() -> None:
    assert inventory.usage(models(node("n1"), node("n2", prov="other"), node("x", prov=None))) == {
        "default": inventory.usage(models(node("n1")))["default"],
        "other": inventory.usage(models(node("n1")))["default"],
    }


def test_existing_nodes_carry_their_csinode_limits_and_the_volumes_their_pods_hold() -> None:
    """Issue 24 (kube-scheduler NodeVolumeLimits): a node's attach limit per CSI driver comes from its
    CSINode; the volumes in use are its pods' distinct claims (two pods sharing one count once)."""
    from extender.cluster import csinodes
    from extender.cluster.volumes import Volumes

    def with_claims(manifest: dict, *claims: str) -> dict:
        manifest["spec"]["volumes"] = [{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims]
        return manifest

    limits = csinodes.limits_by_node(
        [
            {
                "metadata": {"name": "n1"},
                "spec": {
                    "drivers": [
                        {"name": "ebs.csi.aws.com", "allocatable": {"count": 8}},
                        {"name": "efs.csi.aws.com"},
                    ]
                },
            }
        ]
    )
    assert limits == {"n1": (("ebs.csi.aws.com", 8),)}
    volumes = Volumes(
        claims={
            f"ns/{c}": {"metadata": {"name": c, "namespace": "ns"}, "spec": {"storageClassName": "gp3"}}
            for c in ("a", "b", "shared")
        },
        classes={"gp3": {"metadata": {"name": "gp3"}, "provisioner": "ebs.csi.aws.com"}},
    )
    bound = group(
        [
            with_claims(pod("1", name="p1"), "a", "shared"),
            with_claims(pod("1", name="p2"), "b", "shared"),
            with_claims(pod("1", on="n2", name="p3"), "a"),
        ]
    )
    inv = inventory.build(
        models(node("n1"), node("n2")), bound, marked={}, attach_limits=limits, count_volumes=volumes.in_use
    )
    n1, n2 = inv.existing
    assert n1.volume_limits == (("ebs.csi.aws.com", 8),) and n1.volumes_in_use == (("ebs.csi.aws.com", 3),)
    assert n1.volume_room("ebs.csi.aws.com") == 5
    # No CSINode: unlimited, as kube-scheduler treats it.
    assert n2.volume_limits == () and n2.volume_room("ebs.csi.aws.com") > 1000


def test_a_node_with_the_disrupted_taint_takes_no_pods_even_from_pods_tolerating_everything() -> None:
    """The taint is a removal mark (another replica's, or this process's before a restart), not a
    taint to tolerate: a pod with `operator: Exists` would otherwise be planned onto a node leaving."""
    leaving = node("n1")
    leaving["spec"]["taints"].append({"key": wk.DISRUPTED_TAINT_KEY, "effect": "NoSchedule"})
    inv = inventory.build(models(leaving, node("n2")), group([]), marked={})
    assert [(n.name, n.schedulable) for n in inv.existing] == [("n1", False), ("n2", True)]
    assert inv.usage["default"].cpu == 8
