"""NodeClaims on the local control plane: karpy's provisioning and lifecycle in this process
(lifecycle_harness), the real API server validating the NodeClaim CRD, moto for EC2. The NodePools
are real `karpenter.sh/v1` objects with their EC2NodeClasses (helpers.nodepool), their pods select
them with `karpenter.sh/nodepool`.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from extender.api import labels as wk
from extender.api import nodeclaim as nc
from extender.api.disruption import DO_NOT_DISRUPT
from extender.api.node import Node
from extender.api.provisioner import Provisioner
from extender.api.resources import Resources
from extender.cluster import nodeclaims
from tests.integration import lifecycle_harness
from tests.integration.helpers import nodepool, pod_manifest, unique, wait_for
from tests.integration.lifecycle_harness import (
    GC_GRACE,
    Karpy,
    bound_node,
    deployment,
    instance_of,
    instance_state,
    messages,
    node_or_none,
    provisioner,
)

pytestmark = pytest.mark.integration

karpy = lifecycle_harness.karpy
lifecycle_log = lifecycle_harness.lifecycle_log

NODEPOOL_PREFIX = "np-"


def claims_of(kube: Any, pool: str) -> list[dict[str, Any]]:
    return [c for c in nodeclaims.list_claims(kube) if c["metadata"]["labels"].get(nc.NODEPOOL_LABEL) == pool]


def test_nodeclaims_track_nodepool_nodes_from_launch_to_deletion(
    karpy: Karpy,
    core_v1: Any,
    apps_v1: Any,
    namespace: str,
    lifecycle_log: pytest.LogCaptureFixture,
) -> None:
    pool, legacy = unique(NODEPOOL_PREFIX + "pool"), unique("legacy")
    spot = [{"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["spot"]}]
    nodepool(karpy.kube, pool, karpy.settings.cluster_name, spot, empty_after="2s")
    provisioner(karpy.kube, legacy, spot, ttlSecondsAfterEmpty=2)
    deployment(apps_v1, namespace, "pooled", pool, 1, owner_label=wk.NODEPOOL)
    deployment(apps_v1, namespace, "legacy", legacy, 1)
    name = bound_node(core_v1, namespace, "pooled")

    claim = wait_for(lambda: _ready_claim(karpy.kube, pool, name), 60, "the NodePool node's claim Ready")
    node = core_v1.read_node(name)
    status, spec = claim["status"], claim["spec"]
    assert len(claims_of(karpy.kube, pool)) == 1
    assert status["providerID"] == node.spec.provider_id
    assert status["nodeName"] == name
    assert (
        status["imageID"]
        and status["imageID"] == node.metadata.annotations["karpenter.k8s.aws/instance-ami-id"]
    )
    assert set(status["allocatable"]) >= {"cpu", "memory", "pods"}
    conditions = {c.type: c for c in nc.conditions_of(claim)}
    assert {t: conditions[t].status for t in nc.LIFECYCLE} == dict.fromkeys(nc.LIFECYCLE, "True")
    times = [conditions[t].last_transition_time for t in nc.LIFECYCLE]
    assert times == sorted(times), f"Launched -> Registered -> Initialized out of order: {times}"
    reqs = {r["key"]: r.get("values") for r in spec["requirements"]}
    assert reqs[wk.INSTANCE_TYPE] == [node.metadata.labels[wk.INSTANCE_TYPE]]
    assert reqs[wk.ZONE] == [node.metadata.labels[wk.ZONE]]
    assert reqs[wk.CAPACITY_TYPE] == ["spot"]
    assert reqs[nc.NODEPOOL_LABEL] == [pool]
    assert Resources.parse(spec["resources"]["requests"]).cpu >= 1.0
    # The v1alpha5 Provisioner's node has no claim: Karpenter v1 has no Provisioners.
    legacy_node = bound_node(core_v1, namespace, "legacy")
    assert claims_of(karpy.kube, legacy) == []
    # Each transition was written as it happened (the lifecycle logs what it changed).
    log = messages(lifecycle_log)
    claim_name = claim["metadata"]["name"]
    assert f"Created nodeclaim {claim_name} for node {name}" in log
    assert f"Nodeclaim {claim_name} of node {name}: Initialized: Unknown -> True" in log

    apps_v1.delete_namespaced_deployment("pooled", namespace)
    apps_v1.delete_namespaced_deployment("legacy", namespace)
    wait_for(lambda: node_or_none(core_v1, name) is None, 60, "the empty NodePool node deleted")
    # The claim goes before the node's finalizer is lifted.
    assert claims_of(karpy.kube, pool) == []
    assert f"Deleted nodeclaim {claim_name} of node {name}" in messages(lifecycle_log)
    wait_for(lambda: node_or_none(core_v1, legacy_node) is None, 60, "the empty legacy node deleted")


def test_a_claim_whose_node_and_instance_are_gone_is_garbage_collected(
    karpy: Karpy, lifecycle_log: pytest.LogCaptureFixture
) -> None:
    name = _recorded(karpy, "gc", "i-0000000000000dead")
    assert name is not None and nodeclaims.read(karpy.kube, name) is not None
    created = time.monotonic()
    wait_for(lambda: nodeclaims.read(karpy.kube, name) is None, GC_GRACE + 30, "orphan claim collected")
    assert time.monotonic() - created >= GC_GRACE - 3, "claim collected before its grace"
    assert f"Garbage collecting nodeclaim {name} whose node and instance are gone" in messages(lifecycle_log)


def test_deleting_a_nodeclaim_drains_and_terminates_its_node_then_the_claim_goes(
    karpy: Karpy,
    core_v1: Any,
    apps_v1: Any,
    namespace: str,
    lifecycle_log: pytest.LogCaptureFixture,
) -> None:
    """`kubectl delete nodeclaim` (Karpenter v1 docs, concepts/disruption "Manual methods"): the
    claim's karpenter.sh/termination finalizer holds it while its node drains (a do-not-disrupt pod
    holds the drain here), then the node and its instance go, then the claim; the Deployment's pod
    comes back on a new node (kubernetes-sigs/karpenter pkg/controllers/nodeclaim/termination)."""
    pool = unique(NODEPOOL_PREFIX + "del")
    nodepool(
        karpy.kube,
        pool,
        karpy.settings.cluster_name,
        [{"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["spot"]}],
        empty_after="2s",
    )
    deployment(apps_v1, namespace, "claimed", pool, 1, owner_label=wk.NODEPOOL)
    name = bound_node(core_v1, namespace, "claimed")
    claim = wait_for(lambda: _ready_claim(karpy.kube, pool, name), 60, "the node's claim Ready")
    claim_name = claim["metadata"]["name"]
    assert claim["metadata"]["finalizers"] == [wk.TERMINATION_FINALIZER]
    instance = instance_of(core_v1.read_node(name))
    keeper = pod_manifest("keeper", "100m")
    keeper["metadata"]["annotations"] = {DO_NOT_DISRUPT: "true"}
    keeper["spec"]["nodeName"] = name
    core_v1.create_namespaced_pod(namespace, keeper)

    client.CustomObjectsApi(karpy.kube).delete_cluster_custom_object(
        nc.GROUP, nc.VERSION, "nodeclaims", claim_name
    )
    # The node goes through its graceful termination; the keeper holds its drain.
    wait_for(
        lambda: any(
            f"Unable to drain node {name}, pod {namespace}/keeper" in m for m in messages(lifecycle_log)
        ),
        30,
        "the drain held by the do-not-disrupt pod",
    )
    held = core_v1.read_node(name)
    assert held.metadata.deletion_timestamp is not None and held.spec.unschedulable
    terminating = nodeclaims.read(karpy.kube, claim_name)
    assert terminating is not None and terminating["metadata"].get("deletionTimestamp")
    assert terminating["metadata"]["finalizers"] == [wk.TERMINATION_FINALIZER]
    assert instance_state(karpy, instance) == "running"
    assert f"Deleting node {name} of deleted nodeclaim {claim_name}" in messages(lifecycle_log)

    core_v1.delete_namespaced_pod("keeper", namespace, grace_period_seconds=0)
    wait_for(lambda: node_or_none(core_v1, name) is None, 90, "the claim's node deleted")
    assert nodeclaims.read(karpy.kube, claim_name) is None, "the claim outlived its node"
    assert instance_state(karpy, instance) == "terminated"
    wait_for(
        lambda: (n := bound_node(core_v1, namespace, "claimed")) != name and n,
        90,
        "the Deployment's pod on a new node",
    )
    apps_v1.delete_namespaced_deployment("claimed", namespace)
    wait_for(lambda: claims_of(karpy.kube, pool) == [], 60, "the new node and its claim deleted")


def test_deleting_a_nodepool_terminates_its_nodes_through_their_claims(
    karpy: Karpy, core_v1: Any, apps_v1: Any, namespace: str, lifecycle_log: pytest.LogCaptureFixture
) -> None:
    """Karpenter v1: a NodePool's NodeClaims are its dependents (ownerReferences), so deleting it
    lets Kubernetes' garbage collector delete them, and each deleted claim terminates its node."""
    pool = unique(NODEPOOL_PREFIX + "owner")
    nodepool(
        karpy.kube,
        pool,
        karpy.settings.cluster_name,
        [{"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["spot"]}],
    )
    deployment(apps_v1, namespace, "owned", pool, 1, owner_label=wk.NODEPOOL)
    name = bound_node(core_v1, namespace, "owned")
    claim = wait_for(lambda: _ready_claim(karpy.kube, pool, name), 60, "the node's claim Ready")
    assert claim["metadata"]["ownerReferences"][0]["name"] == pool
    instance = instance_of(core_v1.read_node(name))
    client.CustomObjectsApi(karpy.kube).delete_cluster_custom_object(nc.GROUP, nc.VERSION, "nodepools", pool)
    wait_for(lambda: node_or_none(core_v1, name) is None, 90, "the NodePool's node deleted")
    wait_for(lambda: claims_of(karpy.kube, pool) == [], 30, "the NodePool's claim gone")
    assert instance_state(karpy, instance) == "terminated"
    claim_name = claim["metadata"]["name"]
    assert f"Deleting node {name} of deleted nodeclaim {claim_name}" in messages(lifecycle_log)
    apps_v1.delete_namespaced_deployment("owned", namespace)


def test_deleting_a_claim_whose_node_never_came_goes_at_once(
    karpy: Karpy, lifecycle_log: pytest.LogCaptureFixture
) -> None:
    """A launch whose Node was never written: nothing to drain, the claim goes without the GC grace."""
    name = _recorded(karpy, "nonode", "i-0000000000000beef")
    assert name is not None
    assert nodeclaims.read(karpy.kube, name)["metadata"]["finalizers"] == [wk.TERMINATION_FINALIZER]
    started = time.monotonic()
    client.CustomObjectsApi(karpy.kube).delete_cluster_custom_object(nc.GROUP, nc.VERSION, "nodeclaims", name)
    wait_for(lambda: nodeclaims.read(karpy.kube, name) is None, 20, "the deleted claim gone")
    assert time.monotonic() - started < GC_GRACE, "the claim waited for garbage collection"
    assert f"Deleted nodeclaim {name}" in messages(lifecycle_log)


def test_a_claim_written_without_the_finalizer_gets_it_when_the_lifecycle_reads_it(karpy: Karpy) -> None:
    """An upgrade: claims written before claims carried karpenter.sh/termination get it the first
    time a (restarted) lifecycle loads them; every node is looked at when a replica starts leading."""
    pool, old = _without_node("upg", "i-00000000000000abc")
    manifest = nc.manifest(pool, old, "i-00000000000000abc", requests=Resources.of(cpu=1))
    del manifest["metadata"]["finalizers"]
    name = manifest["metadata"]["name"]
    nodeclaims.create(karpy.kube, manifest, nc.launch_status(old, nc.launched(now=datetime.now(UTC))))
    assert "finalizers" not in nodeclaims.read(karpy.kube, name)["metadata"]
    nodeclaims.Tracker(karpy.kube, lambda: datetime.now(UTC)).sync(old, pool)
    assert nodeclaims.read(karpy.kube, name)["metadata"]["finalizers"] == [wk.TERMINATION_FINALIZER]
    # Its node and instance never existed: the lifecycle's GC lifts the finalizer and deletes it.
    wait_for(lambda: nodeclaims.read(karpy.kube, name) is None, GC_GRACE + 30, "the claim collected")


def test_the_crd_refuses_an_invalid_claim_with_the_field_path(karpy: Karpy) -> None:
    claim = {
        "apiVersion": nc.API_VERSION,
        "kind": nc.KIND,
        "metadata": {"name": unique("invalid")},
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": ""},
            "requirements": [{"key": wk.HOSTNAME, "operator": "In", "values": ["x"]}],
        },
    }
    with pytest.raises(ApiException) as refused:
        client.CustomObjectsApi(karpy.kube).create_cluster_custom_object(
            nc.GROUP, nc.VERSION, "nodeclaims", claim
        )
    assert refused.value.status == 422
    body = refused.value.body
    assert "spec.nodeClassRef.name" in body and "name may not be empty" in body
    assert "spec.requirements[0].key" in body and 'label \\"kubernetes.io/hostname\\" is restricted' in body


def test_a_drifted_nodepool_node_shows_drifted_on_its_claim_and_its_replacement_gets_one(
    karpy: Karpy, core_v1: Any, apps_v1: Any, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool = unique(NODEPOOL_PREFIX + "drift")
    nodepool(
        karpy.kube,
        pool,
        karpy.settings.cluster_name,
        [{"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["spot"]}],
        labels={"tier": "a"},
        empty_after="2s",
    )
    deployment(apps_v1, namespace, "drifting", pool, 1, owner_label=wk.NODEPOOL)
    first = bound_node(core_v1, namespace, "drifting")
    claim = wait_for(lambda: _ready_claim(karpy.kube, pool, first), 60, "the first node's claim Ready")
    claim_name = claim["metadata"]["name"]

    # The NodePool's node template changes: its node drifts (NodePoolDrifted) and is replaced.
    # Drift is checked when a node is looked at: every 2 s here (test_drift's setting), 5 min by default.
    monkeypatch.setattr(karpy.settings.lifecycle, "resync_seconds", 2.0)
    client.CustomObjectsApi(karpy.kube).patch_cluster_custom_object(
        "karpenter.sh",
        "v1",
        "nodepools",
        pool,
        {"spec": {"template": {"metadata": {"labels": {"tier": "b"}}}}},
    )

    def drifted() -> nc.Condition | None:
        current = nodeclaims.read(karpy.kube, claim_name)
        return nc.get(nc.conditions_of(current), nc.DRIFTED) if current else None

    condition = wait_for(drifted, 60, "Drifted on the first node's claim")
    assert (condition.status, condition.reason) == ("True", "NodePoolDrifted")
    second = wait_for(
        lambda: (n := bound_node(core_v1, namespace, "drifting")) != first and n,
        90,
        "the pod on a replacement",
    )
    replacement = wait_for(
        lambda: _ready_claim(karpy.kube, pool, second), 60, "the replacement's claim Ready"
    )
    assert nc.get(nc.conditions_of(replacement), nc.DRIFTED) is None
    wait_for(lambda: nodeclaims.read(karpy.kube, claim_name) is None, 60, "the drifted node's claim deleted")
    apps_v1.delete_namespaced_deployment("drifting", namespace)
    wait_for(lambda: claims_of(karpy.kube, pool) == [], 60, "the empty replacement and its claim deleted")


def _without_node(prefix: str, iid: str) -> tuple[Provisioner, Node]:
    """A NodePool and a Node never written to the cluster, for an instance that never ran."""
    pool = Provisioner(name=unique(NODEPOOL_PREFIX + prefix), kind=nc.NODEPOOL_KIND, provider_ref="default")
    node = Node.from_manifest(
        {
            "metadata": {
                "name": unique(prefix),
                "labels": {wk.INSTANCE_TYPE: "m5.large", wk.ZONE: "us-west-2a"},
            },
            "spec": {"providerID": f"aws:///us-west-2a/{iid}"},
        }
    )
    return pool, node


def _recorded(karpy: Karpy, prefix: str, iid: str) -> str | None:
    """The claim of a launch whose Node was never written, as provisioning records it."""
    pool, node = _without_node(prefix, iid)
    return nodeclaims.record_launch(
        karpy.kube, pool, node, requests=Resources.of(cpu=1), now=datetime.now(UTC)
    )


def _ready_claim(kube: Any, pool: str, node: str) -> dict[str, Any] | None:
    for claim in claims_of(kube, pool):
        ready = nc.get(nc.conditions_of(claim), nc.READY)
        if claim["status"].get("nodeName") == node and ready is not None and ready.status == "True":
            return claim
    return None
