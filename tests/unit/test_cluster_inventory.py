"""Every node of the cluster as solver input: karpy's take pods, the others only count for topology;
limits usage and the guard's cache stay karpy's."""

from __future__ import annotations

from functools import partial

from extender.api import labels as wk
from extender.api.node import Node
from extender.cluster import inventory
from extender.cluster.boundpods import group
from tests import builders

#: A c5.xlarge karpy launched, still starting (not-ready taint, no Ready condition); keywords as
#: tests.builders.node_manifest.
karpy_node = partial(
    builders.node_manifest,
    provisioner="default",
    instance=None,
    ready=None,
    labels={wk.INSTANCE_TYPE: "c5.xlarge", wk.ZONE: "us-west-2a"},
    taints=[{"key": wk.NOT_READY_TAINT_KEY, "effect": "NoSchedule"}],
    capacity={"cpu": "4", "memory": "8Gi", "pods": "58"},
    allocatable={"cpu": "3900m", "memory": "7Gi", "pods": "58"},
)


def models(*manifests: dict) -> list[Node]:
    """Nodes as the cluster adapter hands them over: parsed."""
    return [Node.from_manifest(m) for m in manifests]


#: A Running pod named p bound to n1; keywords as tests.builders.pod_manifest.
bound_pod = partial(
    builders.pod_manifest, name="p", namespace="ns", uid="", image=None, node_name="n1", phase="Running"
)


def test_in_flight_node_offers_its_room_without_its_start_up_taints() -> None:
    starting = karpy_node("n1")
    starting["spec"]["taints"] += [
        {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
        {"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"},
    ]
    inv = inventory.build(
        models(starting), group([bound_pod(name="a", cpu="1"), bound_pod(name="b", cpu="500m")]), marked={}
    )
    (existing,) = inv.existing
    assert existing.taints == () and existing.pod_count == 2 and existing.schedulable
    assert existing.requested.cpu == 1.5 and existing.allocatable.cpu == 3.9
    assert {p.key for p in existing.pods} == {"ns/a", "ns/b"}
    assert inv.usage["default"].cpu == 4 and inv.usage["default"].memory == 8 * 2**30


def test_marked_cordoned_and_deleting_nodes_count_for_limits_and_topology_but_take_no_pods() -> None:
    deleting = karpy_node("n3")
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    inv = inventory.build(
        models(karpy_node("n1"), karpy_node("n2", unschedulable=True), deleting),
        group([bound_pod(cpu="1", node_name="n2", labels={"app": "web"})]),
        marked={"n1": "empty"},
    )
    assert [(n.name, n.schedulable) for n in inv.existing] == [("n1", False), ("n2", False), ("n3", False)]
    assert inv.existing[1].pods[0].labels == {"app": "web"}
    assert inv.usage["default"].cpu == 12
    assert {n.name for n in inv.nodes} == {"n1", "n2", "n3"}


def test_other_nodes_bring_pods_and_taints_but_no_usage_and_no_cache_entry() -> None:
    theirs = karpy_node("ng-1", provisioner=None)
    theirs["spec"]["taints"] += [
        {"key": "dedicated", "value": "db", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
    ]
    inv = inventory.build(
        models(theirs, karpy_node("n1")),
        group([bound_pod(cpu="2", node_name="ng-1", labels={"app": "db"})]),
        marked={},
    )
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
    bad = bound_pod(name="bad", cpu="1x")
    done = bound_pod(name="done", cpu="1", phase="Succeeded")
    inv = inventory.build(
        models(karpy_node("n1")), group([bound_pod(name="ok", cpu="1"), bad, done]), marked={}
    )
    (existing,) = inv.existing
    # A pod karpy cannot read still takes a pod slot; a finished one takes nothing.
    assert [p.key for p in existing.pods] == ["ns/ok"] and existing.pod_count == 2
    assert existing.requested.cpu == 1


def test_inventory_names_the_pods_bound_to_any_node_and_keeps_namespaces() -> None:
    inv = inventory.build(
        models(karpy_node("n1"), karpy_node("x", provisioner=None)),
        group(
            [
                bound_pod(name="bound", cpu="1", node_name="n1"),
                bound_pod(name="p", cpu="1", node_name="x"),
                bound_pod(name="q", cpu="1", node_name="gone"),
            ]
        ),
        marked={},
        namespaces={"ns": {"team": "a"}},
    )
    assert inv.assigned == {"ns/bound", "ns/p", "ns/q"}
    assert inv.namespaces == {"ns": {"team": "a"}}


def test_usage_counts_karpy_nodes_only() -> None:
    assert inventory.usage(
        models(karpy_node("n1"), karpy_node("n2", provisioner="other"), karpy_node("x", provisioner=None))
    ) == {
        "default": inventory.usage(models(karpy_node("n1")))["default"],
        "other": inventory.usage(models(karpy_node("n1")))["default"],
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
            with_claims(bound_pod(name="p1", cpu="1"), "a", "shared"),
            with_claims(bound_pod(name="p2", cpu="1"), "b", "shared"),
            with_claims(bound_pod(name="p3", cpu="1", node_name="n2"), "a"),
        ]
    )
    inv = inventory.build(
        models(karpy_node("n1"), karpy_node("n2")),
        bound,
        marked={},
        attach_limits=limits,
        count_volumes=volumes.in_use,
    )
    n1, n2 = inv.existing
    assert n1.volume_limits == (("ebs.csi.aws.com", 8),) and n1.volumes_in_use == (("ebs.csi.aws.com", 3),)
    assert n1.volume_room("ebs.csi.aws.com") == 5
    # No CSINode: unlimited, as kube-scheduler treats it.
    assert n2.volume_limits == () and n2.volume_room("ebs.csi.aws.com") > 1000


def test_a_node_with_the_disrupted_taint_takes_no_pods_even_from_pods_tolerating_everything() -> None:
    """The taint is a removal mark (another replica's, or this process's before a restart), not a
    taint to tolerate: a pod with `operator: Exists` would otherwise be planned onto a node leaving."""
    leaving = karpy_node("n1")
    leaving["spec"]["taints"].append({"key": wk.DISRUPTED_TAINT_KEY, "effect": "NoSchedule"})
    inv = inventory.build(models(leaving, karpy_node("n2")), group([]), marked={})
    assert [(n.name, n.schedulable) for n in inv.existing] == [("n1", False), ("n2", True)]
    assert inv.usage["default"].cpu == 8
