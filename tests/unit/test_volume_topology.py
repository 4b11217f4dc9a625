"""Volume topology (kube-scheduler VolumeBinding/VolumeZone; Karpenter 0.5 volumetopology.go): a pod's
claims pin it to the nodes their volumes allow; a claim karpy cannot resolve leaves the pod unmodelled."""

from __future__ import annotations

from functools import partial

from extender.api import labels as wk
from extender.api.pod import Pod
from extender.api.provisioner import Requirement
from extender.cluster.volumes import Volumes
from extender.scheduling.solver import solve
from tests import builders
from tests.unit.scheduling.builders import ZONES, catalog, make_provisioner

#: The pod db-0 in namespace data; give it `volumes=[...]`; keywords as tests.builders.pod_manifest.
db_pod = partial(builders.pod_manifest, "db-0", namespace="data", uid="", image=None, cpu="1")


def claim(name, **spec):
    return {"metadata": {"name": name, "namespace": "data"}, "spec": spec}


PV = {
    "metadata": {"name": "pv-1"},
    "spec": {
        "nodeAffinity": {
            "required": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "topology.ebs.csi.aws.com/zone", "operator": "In", "values": [ZONES[1]]}
                        ]
                    }
                ]
            }
        }
    },
}
WAIT = {
    "metadata": {"name": "gp3", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
    "volumeBindingMode": "WaitForFirstConsumer",
    "allowedTopologies": [{"matchLabelExpressions": [{"key": wk.ZONE, "values": [ZONES[2]]}]}],
}
BOUND_META = {"name": "bound", "namespace": "data", "annotations": {"pv.kubernetes.io/bind-completed": "yes"}}
IMMEDIATE = {"metadata": {"name": "io2"}, "volumeBindingMode": "Immediate"}
VOLUMES = Volumes(
    claims={
        "data/bound": {**claim("bound", volumeName="pv-1"), "metadata": BOUND_META},
        "data/waiting": claim("waiting"),
        "data/immediate": claim("immediate", storageClassName="io2"),
    },
    volumes={"pv-1": PV},
    classes={"gp3": WAIT, "io2": IMMEDIATE},
)


def zone_of(manifest):
    parsed = Pod.from_manifest(manifest, VOLUMES.topology(manifest))
    plan = solve([parsed], [make_provisioner()], catalog())
    return plan.nodes[0].zones if plan.nodes else plan.unschedulable[0]


def test_bound_claim_pins_the_pod_to_its_volumes_zone_csi_key_understood():
    assert zone_of(db_pod(volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "bound"}}])) == (
        ZONES[1],
    )


def test_wait_for_first_consumer_claim_follows_the_default_class_allowed_topologies():
    assert zone_of(db_pod(volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "waiting"}}])) == (
        ZONES[2],
    )


def test_generic_ephemeral_volume_uses_its_template_class_before_the_claim_exists():
    ephemeral = {
        "name": "scratch",
        "ephemeral": {"volumeClaimTemplate": {"spec": {"storageClassName": "gp3"}}},
    }
    assert zone_of(db_pod(volumes=[ephemeral])) == (ZONES[2],)


def test_unresolvable_claims_leave_the_pod_unmodelled():
    result = zone_of(db_pod(volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "missing"}}]))
    assert result.unmodelled and "claim missing" in result.reason


def test_an_immediate_claim_not_yet_bound_follows_its_class_and_is_left_to_kube_scheduler():
    immediate = {**IMMEDIATE, "allowedTopologies": WAIT["allowedTopologies"]}
    volumes = Volumes(claims=VOLUMES.claims, classes={"io2": immediate})
    resolved = volumes.resolve(
        db_pod(volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "immediate"}}])
    )
    assert resolved.topology["immediate"] == ((Requirement(wk.ZONE, "In", (ZONES[2],)),),)
    assert resolved.deferred == (
        "spec.volumes[0]: claim immediate waits for the PV controller to bind it (Immediate); "
        "kube-scheduler binds the pod then",
    )


def test_two_volumes_in_different_zones_cannot_be_met():
    both = db_pod(
        volumes=[
            {"name": "a", "persistentVolumeClaim": {"claimName": "bound"}},
            {"name": "b", "persistentVolumeClaim": {"claimName": "waiting"}},
        ]
    )
    result = zone_of(both)
    assert not result.unmodelled and "zone" in result.reason


def test_claims_a_wait_for_first_consumer_class_has_yet_to_provision_are_left_to_kube_scheduler():
    """kube-scheduler's VolumeBinding PreBind provisions these on the chosen node before binding
    (pkg/scheduler/framework/plugins/volumebinding); karpy's bind would skip it, so they are
    deferred. Bound claims and plain volumes are not named."""
    ephemeral = {
        "name": "scratch",
        "ephemeral": {"volumeClaimTemplate": {"spec": {"storageClassName": "gp3"}}},
    }
    manifest = db_pod(
        volumes=[
            {"name": "a", "persistentVolumeClaim": {"claimName": "bound"}},
            {"name": "b", "persistentVolumeClaim": {"claimName": "waiting"}},
            {"name": "c", "emptyDir": {}},
            ephemeral,
        ]
    )
    why = "waits for a volume bound on the chosen node (WaitForFirstConsumer)"
    resolved = VOLUMES.resolve(manifest)
    assert resolved.deferred == (
        f"spec.volumes[1]: claim waiting {why}",
        f"spec.volumes[3]: claim db-0-scratch {why}",
    )
    assert not resolved.unresolved
    assert not VOLUMES.resolve(
        db_pod(volumes=[{"name": "a", "persistentVolumeClaim": {"claimName": "bound"}}])
    ).deferred


# --- statically provisioned volumes (kubernetes.io/no-provisioner): VolumeBinding's findMatchingVolumes


def static_pv(name, zone, **spec):
    base = {
        "storageClassName": "local",
        "capacity": {"storage": "10Gi"},
        "accessModes": ["ReadWriteOnce"],
        "nodeAffinity": {
            "required": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": wk.ZONE, "operator": "In", "values": [zone]}]}
                ]
            }
        },
    }
    return {"metadata": {"name": name}, "spec": {**base, **spec}, "status": {"phase": "Available"}}


LOCAL = {
    "metadata": {"name": "local"},
    "provisioner": "kubernetes.io/no-provisioner",
    "volumeBindingMode": "WaitForFirstConsumer",
}
STATIC_CLAIM = claim(
    "data",
    storageClassName="local",
    accessModes=["ReadWriteOnce"],
    resources={"requests": {"storage": "5Gi"}},
)


def static(*pvs, claim_=STATIC_CLAIM):
    volumes = Volumes(
        claims={"data/data": claim_},
        volumes={pv["metadata"]["name"]: pv for pv in pvs},
        classes={"local": LOCAL},
    )
    return volumes.resolve(db_pod(volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]))


def zones_of(resolved):
    return sorted(r.values[0] for term in resolved.topology["data"] for r in term)


def test_a_static_claim_may_land_where_any_volume_it_can_bind_to_is():
    resolved = static(static_pv("a", ZONES[0]), static_pv("b", ZONES[1]), static_pv("c", ZONES[1]))
    assert zones_of(resolved) == [ZONES[0], ZONES[1]]
    assert resolved.deferred and "WaitForFirstConsumer" in resolved.deferred[0]


def test_a_static_claim_skips_volumes_it_cannot_bind_to():
    """Other class, too small, missing an access mode, another volume mode, bound or claimed by
    another claim, Released, being deleted: only volume `ok` in zone c matches."""
    deleting = static_pv("deleting", ZONES[0])
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    released = static_pv("released", ZONES[0])
    released["status"]["phase"] = "Released"
    resolved = static(
        static_pv("other-class", ZONES[0], storageClassName="gp3"),
        static_pv("small", ZONES[0], capacity={"storage": "1Gi"}),
        static_pv("read-many", ZONES[0], accessModes=["ReadOnlyMany"]),
        static_pv("block", ZONES[0], volumeMode="Block"),
        static_pv("taken", ZONES[0], claimRef={"namespace": "data", "name": "other"}),
        released,
        deleting,
        static_pv("ok", ZONES[2]),
    )
    assert zones_of(resolved) == [ZONES[2]]


def test_a_volume_pre_bound_to_the_claim_matches_whatever_its_phase():
    mine = static_pv("mine", ZONES[1], claimRef={"namespace": "data", "name": "data"})
    mine["status"]["phase"] = "Bound"
    assert zones_of(static(mine)) == [ZONES[1]]


def test_a_claim_selector_picks_volumes_by_label():
    labelled = static_pv("labelled", ZONES[1])
    labelled["metadata"]["labels"] = {"tier": "fast"}
    selecting = {
        **STATIC_CLAIM,
        "spec": {**STATIC_CLAIM["spec"], "selector": {"matchLabels": {"tier": "fast"}}},
    }
    assert zones_of(static(static_pv("plain", ZONES[0]), labelled, claim_=selecting)) == [ZONES[1]]


def test_a_volume_without_node_affinity_lets_the_claim_land_anywhere():
    unpinned = static_pv("anywhere", ZONES[0])
    del unpinned["spec"]["nodeAffinity"]
    assert static(static_pv("a", ZONES[1]), unpinned).topology["data"] == ()


def test_a_static_claim_without_a_volume_to_bind_to_is_unresolved_naming_it():
    resolved = static(static_pv("small", ZONES[0], capacity={"storage": "1Gi"}))
    assert "data" not in resolved.topology
    assert resolved.unresolved == (
        "spec.volumes[0]: claim data has no available PersistentVolume to bind to"
        " (kubernetes.io/no-provisioner)",
    )


def test_unresolved_claims_say_why():
    lost = claim("lost", storageClassName="gp3")
    lost["status"] = {"phase": "Lost"}
    pending_bind = claim("half", volumeName="pv-1")
    volumes = Volumes(
        claims={
            "data/lost": lost,
            "data/half": pending_bind,
            "data/nameless": claim("nameless", storageClassName=""),
        },
        volumes={"pv-1": PV},
        classes={"gp3": WAIT},
    )
    manifest = db_pod(
        volumes=[
            *(
                {"name": n, "persistentVolumeClaim": {"claimName": n}}
                for n in ("lost", "half", "nameless", "gone")
            )
        ]
    )
    assert volumes.resolve(manifest).unresolved == (
        "spec.volumes[0]: claim lost is Lost",
        "spec.volumes[1]: claim half names volume pv-1, but the bind is not complete yet",
        "spec.volumes[2]: claim nameless has no StorageClass and no volume",
        "spec.volumes[3]: claim gone does not exist",
    )
