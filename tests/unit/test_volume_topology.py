"""Volume topology (kube-scheduler VolumeBinding/VolumeZone; Karpenter 0.5 volumetopology.go): a pod's
claims pin it to the nodes their volumes allow; a claim karpy cannot resolve leaves the pod unmodelled."""

from __future__ import annotations

from extender.api import labels as wk
from extender.api.pod import Pod
from extender.cluster.volumes import Volumes
from extender.scheduling.solver import solve
from tests.unit.scheduling.builders import ZONES, catalog, make_provisioner


def pod(*volumes):
    return {
        "metadata": {"name": "db-0", "namespace": "data"},
        "spec": {
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
            "volumes": list(volumes),
        },
    }


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
    assert zone_of(pod({"name": "d", "persistentVolumeClaim": {"claimName": "bound"}})) == (ZONES[1],)


def test_wait_for_first_consumer_claim_follows_the_default_class_allowed_topologies():
    assert zone_of(pod({"name": "d", "persistentVolumeClaim": {"claimName": "waiting"}})) == (ZONES[2],)


def test_generic_ephemeral_volume_uses_its_template_class_before_the_claim_exists():
    ephemeral = {
        "name": "scratch",
        "ephemeral": {"volumeClaimTemplate": {"spec": {"storageClassName": "gp3"}}},
    }
    assert zone_of(pod(ephemeral)) == (ZONES[2],)


def test_unresolvable_claims_leave_the_pod_unmodelled():
    for name in ("immediate", "missing"):
        result = zone_of(pod({"name": "d", "persistentVolumeClaim": {"claimName": name}}))
        assert result.unmodelled and f"claim {name}" in result.reason


def test_two_volumes_in_different_zones_cannot_be_met():
    both = pod(
        {"name": "a", "persistentVolumeClaim": {"claimName": "bound"}},
        {"name": "b", "persistentVolumeClaim": {"claimName": "waiting"}},
    )
    result = zone_of(both)
    assert not result.unmodelled and "zone" in result.reason


def test_claims_a_wait_for_first_consumer_class_has_yet_to_provision_are_named():
    """kube-scheduler's VolumeBinding PreBind provisions these on the chosen node before binding
    (pkg/scheduler/framework/plugins/volumebinding); karpy's bind would skip it, so the controller
    reports such pods instead of binding them. Bound claims and plain volumes are not named."""
    ephemeral = {
        "name": "scratch",
        "ephemeral": {"volumeClaimTemplate": {"spec": {"storageClassName": "gp3"}}},
    }
    manifest = pod(
        {"name": "a", "persistentVolumeClaim": {"claimName": "bound"}},
        {"name": "b", "persistentVolumeClaim": {"claimName": "waiting"}},
        {"name": "c", "emptyDir": {}},
        ephemeral,
    )
    assert VOLUMES.awaiting_provisioning(manifest) == ["waiting", "db-0-scratch"]
    assert (
        VOLUMES.awaiting_provisioning(pod({"name": "a", "persistentVolumeClaim": {"claimName": "bound"}}))
        == []
    )
