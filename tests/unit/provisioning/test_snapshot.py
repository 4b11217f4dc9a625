"""The re-check before binding: a sound plan passes whatever the order of its binds; what changed
on the live node since planning refuses the pods it affects."""

from __future__ import annotations

import dataclasses
from functools import partial

from extender.api import labels as wk
from extender.api.pod import Pod
from extender.api.resources import Resources
from extender.provisioning.snapshot import BindSnapshot, with_pods, without_pod
from tests.model_builders import existing_node

#: An empty c5.2xlarge (8 CPU, 16Gi, 58 pods); keywords as tests.model_builders.existing_node.
c5_node = partial(
    existing_node,
    instance_type="c5.2xlarge",
    allocatable=Resources({"cpu": 8, "memory": 16 * 2**30, "pods": 58}),
    requested=Resources(),
)


def spread_pod(name: str, **spec: object) -> Pod:
    return Pod.from_manifest(
        {
            "metadata": {"name": name, "namespace": "ns", "labels": {"app": "web"}},
            "spec": {
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                "topologySpreadConstraints": [
                    {
                        "maxSkew": 1,
                        "topologyKey": wk.ZONE,
                        "whenUnsatisfiable": "DoNotSchedule",
                        "labelSelector": {"matchLabels": {"app": "web"}},
                    }
                ],
                **spec,
            },
        }
    )


def anti_pod(name: str, labels: dict[str, str], against: dict[str, str]) -> Pod:
    return Pod.from_manifest(
        {
            "metadata": {"name": name, "namespace": "ns", "labels": labels},
            "spec": {
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                "affinity": {
                    "podAntiAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            {"topologyKey": wk.HOSTNAME, "labelSelector": {"matchLabels": against}}
                        ]
                    }
                },
            },
        }
    )


def test_zone_spread_plan_passes_in_any_bind_order() -> None:
    """3 pods run in zone a; the plan puts 3 new ones on b's node and 3 on c's. Checked against the
    binds made so far, the second pod into b would see b=1, c=0 (skew 2) once c's node exists."""
    running = tuple(spread_pod(f"old{i}") for i in range(3))
    b_pods = [spread_pod(f"b{i}") for i in range(3)]
    c_pods = [spread_pod(f"c{i}") for i in range(3)]
    for first, second in (("b", "c"), ("c", "b")):
        snapshot = BindSnapshot([with_pods(c5_node("a", zone="us-west-2a"), running)], namespaces={})
        groups = {"b": b_pods, "c": c_pods}
        for name in (first, second):
            admitted, refused = snapshot.admit(c5_node(name, zone=f"us-west-2{name}"), groups[name])
            assert refused == [] and admitted == groups[name]


def test_pods_planned_onto_an_existing_empty_node_count_before_its_binds() -> None:
    running = tuple(spread_pod(f"old{i}") for i in range(3))
    b_pods = [spread_pod(f"b{i}") for i in range(3)]
    c_pods = [spread_pod(f"c{i}") for i in range(3)]
    empty_c = c5_node("c", zone="us-west-2c")
    snapshot = BindSnapshot(
        [with_pods(c5_node("a", zone="us-west-2a"), running), empty_c], namespaces={}, planned={"c": c_pods}
    )
    assert snapshot.admit(c5_node("b", zone="us-west-2b"), b_pods) == (b_pods, [])
    assert snapshot.admit(empty_c, c_pods) == (c_pods, [])


def test_a_pod_kube_scheduler_placed_meanwhile_refuses_the_conflicting_pod() -> None:
    planned = anti_pod("mine", {"app": "x"}, against={"app": "db"})
    other = Pod.from_manifest(
        {"metadata": {"name": "db", "namespace": "ns", "labels": {"app": "db"}}, "spec": {"containers": []}}
    )
    existing = c5_node("n1", zone="us-west-2a")
    snapshot = BindSnapshot([existing], namespaces={}, planned={"n1": [planned]})
    live = with_pods(existing, [other])  # bound by kube-scheduler after the plan was made
    admitted, refused = snapshot.admit(live, [planned])
    assert admitted == []
    ((pod, reason),) = refused
    assert pod is planned and "anti-affinity" in reason and "ns/db" in reason
    # The refused pod leaves the picture: it does not count for later checks.
    assert [p.key for p in snapshot.node("n1").pods] == ["ns/db"]


def test_room_taken_meanwhile_refuses_what_no_longer_fits() -> None:
    first, second = spread_pod("p1"), spread_pod("p2")
    small = c5_node(
        "n1", zone="us-west-2a", allocatable=Resources({"cpu": 2, "memory": 16 * 2**30, "pods": 58})
    )
    filler = Pod.from_manifest(
        {
            "metadata": {"name": "filler", "namespace": "other"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
        }
    )
    snapshot = BindSnapshot([small], namespaces={}, planned={"n1": [first, second]})
    admitted, refused = snapshot.admit(with_pods(small, [filler]), [first, second])
    assert [p.key for p in admitted] == ["ns/p1"]
    assert [p.key for p, _ in refused] == ["ns/p2"] and "insufficient cpu" in refused[0][1]


def test_batch_pods_count_for_each_other_first_come_first_bound() -> None:
    """Two pods of one app with hostname anti-affinity on two nodes: each passes; a third pod put
    beside the first (a plan the solver never makes) is refused, the first is not."""
    one, two = anti_pod("one", {"app": "a"}, {"app": "a"}), anti_pod("two", {"app": "a"}, {"app": "a"})
    three = anti_pod("three", {"app": "a"}, {"app": "a"})
    snapshot = BindSnapshot(
        [c5_node("n1", zone="us-west-2a"), c5_node("n2", zone="us-west-2b")],
        namespaces={},
        planned={"n1": [one], "n2": [two]},
    )
    assert snapshot.admit(c5_node("n2", zone="us-west-2b"), [two])[1] == []
    admitted, refused = snapshot.admit(c5_node("n1", zone="us-west-2a"), [one, three])
    assert admitted == [one] and [p.key for p, _ in refused] == ["ns/three"]


def test_forget_takes_failed_binds_out_of_the_picture() -> None:
    pod = spread_pod("p")
    snapshot = BindSnapshot([c5_node("n1", zone="us-west-2a")], namespaces={}, planned={"n1": [pod]})
    assert [p.key for p in snapshot.node("n1").pods] == ["ns/p"]
    snapshot.forget("n1", [pod])
    assert snapshot.node("n1").pods == () and snapshot.node("n1").pod_count == 0


def test_with_and_without_keep_requests_and_counts() -> None:
    base = c5_node("n1", zone="us-west-2a")
    pods = [spread_pod("p1"), spread_pod("p2")]
    full = with_pods(base, pods)
    assert full.pod_count == 2 and full.requested.cpu == 2
    assert with_pods(full, pods) is full
    less = without_pod(full, "ns/p1")
    assert less.pod_count == 1 and less.requested.cpu == 1 and [p.key for p in less.pods] == ["ns/p2"]
    assert without_pod(less, "ns/nope") is less


def test_a_plain_pod_is_still_refused_by_the_anti_affinity_of_a_pod_elsewhere() -> None:
    """Symmetry: the running pod's zone anti-affinity selects the incoming pod, which has no rules
    of its own; another node of that zone refuses it, a node of another zone does not."""
    keeper = Pod.from_manifest(
        {
            "metadata": {"name": "keeper", "namespace": "ns", "labels": {"app": "keeper"}},
            "spec": {
                "containers": [],
                "affinity": {
                    "podAntiAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            {"topologyKey": wk.ZONE, "labelSelector": {"matchLabels": {"app": "web"}}}
                        ]
                    }
                },
            },
        }
    )
    plain = Pod.from_manifest(
        {"metadata": {"name": "web", "namespace": "ns", "labels": {"app": "web"}}, "spec": {"containers": []}}
    )
    others = [c5_node(f"filler-{i}", zone="us-west-2c") for i in range(3)]
    snapshot = BindSnapshot([with_pods(c5_node("k", zone="us-west-2a"), (keeper,)), *others], namespaces={})
    admitted, refused = snapshot.admit(c5_node("same-zone", zone="us-west-2a"), [plain])
    assert admitted == [] and "keeper" in refused[0][1]
    assert snapshot.admit(c5_node("other-zone", zone="us-west-2b"), [plain]) == ([plain], [])


EBS = "ebs.csi.aws.com"


def volume_pod(name: str, claim: str) -> Pod:
    pod = Pod.from_manifest(
        {
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}],
            },
        }
    )
    # As cluster/volumes.resolve leaves a pod whose claim is bound to an EBS CSI volume.
    return dataclasses.replace(pod, unmodelled=(), csi_claims=((EBS, claim),))


def test_the_recheck_counts_csi_attach_limits_of_the_nodes_csinode() -> None:
    """kube-scheduler NodeVolumeLimits (pkg/scheduler/framework/plugins/nodevolumelimits/csi.go):
    the node as read again before binding has no CSINode figures of its own; the batch's (limit 3,
    one volume in use) still count, and so do the volumes of pods admitted before in the group.
    A claim a pod there already holds takes no more room."""
    bound = volume_pod("bound", "c0")
    limited = dataclasses.replace(
        with_pods(c5_node("n1", zone="us-west-2a"), (bound,)),
        volume_limits=((EBS, 3),),
        volumes_in_use=((EBS, 1),),
    )
    group = [volume_pod("p1", "c1"), volume_pod("p2", "c2"), volume_pod("p3", "c0"), volume_pod("p4", "c4")]
    snapshot = BindSnapshot([limited], namespaces={}, planned={"n1": group})
    live = with_pods(c5_node("n1", zone="us-west-2a"), (Pod.from_manifest(_manifest_of(bound)),))
    admitted, refused = snapshot.admit(live, group)
    assert [p.name for p in admitted] == ["p1", "p2", "p3"]
    assert [p.name for p, _ in refused] == ["p4"] and "exceed max volume count" in refused[0][1]


def _manifest_of(pod: Pod) -> dict[str, object]:
    """A bound pod as listed again from the API server: its claims named, not resolved to drivers."""
    return {
        "metadata": {"name": pod.name, "namespace": pod.namespace},
        "spec": {
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": n}} for n in pod.claims],
        },
    }
