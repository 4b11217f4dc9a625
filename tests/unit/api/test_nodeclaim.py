"""The NodeClaim builder and its condition transitions (extender/api/nodeclaim.py), on plain data.

Condition rules are Karpenter v1's: kubernetes-sigs/karpenter pkg/controllers/nodeclaim/lifecycle
(registration.go, initialization.go), pkg/controllers/nodeclaim/disruption (drift.go,
consolidation.go), and the Ready root of awslabs/operatorpkg status/condition_set.go.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import partial

import pytest

from extender.api import labels as wk
from extender.api import nodeclaim as nc
from extender.api.nodeclass import AMI_ID_ANNOTATION
from extender.api.provisioner import Provisioner, Requirement, Taint
from extender.api.resources import Resources
from tests import builders

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
T1 = T0 + timedelta(seconds=5)
T2 = T0 + timedelta(seconds=9)

POOL = Provisioner(
    name="general",
    kind="NodePool",
    uid="3f1c-uid",
    provider_ref="default",
    requirements=(
        Requirement(wk.CAPACITY_TYPE, "In", ("spot", "on-demand")),
        Requirement("karpenter.k8s.aws/instance-family", "In", ("m5", "c5")),
        Requirement("team", "Exists"),
        Requirement("beta.kubernetes.io/arch", "In", ("amd64",)),
    ),
    ttl_seconds_until_expired=720 * 3600,
    termination_grace_period=90 * 60,
    taints=(Taint("dedicated", "NoSchedule", "web"),),
)


#: The allocatable of the node below unless a test gives one.
ALLOCATABLE = {"cpu": "1930m", "memory": "7Gi", "pods": "29"}
#: The Node karpy launched for the claim: an m5.large spot node of `general`, tainted dedicated=web
#: unless a test gives `taints`; keywords as tests.builders.node.
node = partial(
    builders.node,
    "ip-10-0-1-7.ec2.internal",
    launched="m5.large",
    capacity_type="spot",
    provisioner="general",
    instance="i-0abc123",
    labels={"karpenter.k8s.aws/instance-family": "m5"},
    annotations={AMI_ID_ANNOTATION: "ami-0123"},
    taints=[{"key": "dedicated", "value": "web", "effect": "NoSchedule"}],
    capacity={"cpu": "2", "memory": "8Gi", "pods": "29"},
    allocatable=ALLOCATABLE,
)


def kinds(conditions: nc.Conditions) -> dict[str, tuple[str, str]]:
    return {c.type: (c.status, c.reason) for c in conditions}


# -- the object ------------------------------------------------------------------------------------


def test_the_claim_records_the_launch_as_karpenter_v1_does() -> None:
    requests = Resources({"cpu": 1.5, "memory": 2**30, "attachable-volumes-csi-ebs.csi.aws.com": 2})
    claim = nc.manifest(POOL, node(), "i-0abc123", requests=requests)
    meta, spec = claim["metadata"], claim["spec"]
    assert claim["apiVersion"] == "karpenter.sh/v1" and claim["kind"] == "NodeClaim"
    assert meta["name"] == "general-0abc123"
    assert meta["labels"][nc.NODEPOOL_LABEL] == "general"
    assert meta["labels"][wk.INSTANCE_TYPE] == "m5.large"
    assert wk.HOSTNAME not in meta["labels"] and wk.PROVISIONER_NAME not in meta["labels"]
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "name": "general",
            "uid": "3f1c-uid",
            "blockOwnerDeletion": True,
        }
    ]
    assert meta["finalizers"] == ["karpenter.sh/termination"]
    assert spec["nodeClassRef"] == {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
    assert spec["resources"] == {"requests": {"cpu": "1500m", "memory": "1Gi"}}
    assert spec["taints"] == [{"key": "dedicated", "effect": "NoSchedule", "value": "web"}]
    assert spec["startupTaints"] == []
    assert spec["expireAfter"] == "720h"
    assert spec["terminationGracePeriod"] == "1h30m"


def test_requirements_are_narrowed_to_what_the_launch_settled() -> None:
    reqs = {
        r["key"]: r
        for r in nc.manifest(POOL, node(), "i-0abc123", requests=Resources())["spec"]["requirements"]
    }
    assert reqs[wk.CAPACITY_TYPE] == {"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["spot"]}
    assert reqs["karpenter.k8s.aws/instance-family"]["values"] == ["m5"]
    assert reqs[wk.INSTANCE_TYPE]["values"] == ["m5.large"]
    assert reqs[wk.ZONE]["values"] == ["us-west-2a"]
    assert reqs[nc.NODEPOOL_LABEL]["values"] == ["general"]
    # The deprecated key reads as the GA one, once.
    assert reqs[wk.ARCH]["values"] == ["amd64"] and "beta.kubernetes.io/arch" not in reqs
    # A key the node has no label for keeps the NodePool's requirement.
    assert reqs["team"] == {"key": "team", "operator": "Exists"}


def test_min_values_stay_on_unsettled_keys_only() -> None:
    """Karpenter's NodeClaim requirements carry minValues (NodeSelectorRequirementWithMinValues); a key
    narrowed to the one value the launch settled drops it (the CRD's CEL: In lists >= minValues)."""
    from dataclasses import replace

    pool = replace(
        POOL,
        requirements=(
            Requirement("karpenter.k8s.aws/instance-family", "In", ("m5", "c5"), min_values=2),
            Requirement("team", "Exists", min_values=1),
        ),
    )
    reqs = {
        r["key"]: r
        for r in nc.manifest(pool, node(), "i-0abc123", requests=Resources())["spec"]["requirements"]
    }
    assert reqs["karpenter.k8s.aws/instance-family"] == {
        "key": "karpenter.k8s.aws/instance-family",
        "operator": "In",
        "values": ["m5"],
    }
    assert reqs["team"] == {"key": "team", "operator": "Exists", "minValues": 1}


def test_no_owner_reference_without_the_nodepool_uid_and_never_expires_when_unset() -> None:
    from dataclasses import replace

    pool = replace(POOL, uid="", ttl_seconds_until_expired=None, termination_grace_period=None)
    claim = nc.manifest(pool, node(), "i-0abc123", requests=Resources())
    assert "ownerReferences" not in claim["metadata"]
    assert claim["spec"]["expireAfter"] == "Never"
    assert "terminationGracePeriod" not in claim["spec"]


def test_status_carries_what_the_launch_resolved() -> None:
    status = nc.launch_status(node(), nc.launched(now=T0))
    assert status["providerID"] == "aws:///us-west-2a/i-0abc123"
    assert status["nodeName"] == "ip-10-0-1-7.ec2.internal"
    assert status["imageID"] == "ami-0123"
    assert status["capacity"] == {"cpu": "2", "memory": "8Gi", "pods": "29"}
    assert status["allocatable"]["cpu"] == "1930m"
    launched = status["conditions"][0]
    assert launched == {
        "type": "Launched",
        "status": "True",
        "reason": "Launched",
        "message": "",
        "lastTransitionTime": "2026-01-01T12:00:00Z",
        "observedGeneration": 1,
    }


def test_only_nodepools_get_claims() -> None:
    assert POOL.records_nodeclaims
    assert not Provisioner(name="default").records_nodeclaims


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "Never"),
        (0, "0s"),
        (45, "45s"),
        (3600, "1h"),
        (5400, "1h30m"),
        (2592000, "720h"),
        (3661, "1h1m1s"),
    ],
)
def test_durations_match_the_crd_pattern(seconds: int | None, text: str) -> None:
    assert nc.duration(seconds) == text


@pytest.mark.parametrize(
    ("key", "allowed"),
    [
        # The CRD's CEL rules on requirements[].key (karpenter.sh_nodeclaims.yaml).
        (wk.INSTANCE_TYPE, True),
        ("beta.kubernetes.io/arch", True),
        ("node.kubernetes.io/windows-build", True),
        ("example.node.kubernetes.io/pool", True),
        ("node-restriction.kubernetes.io/team", True),
        ("kubernetes.io/hostname", False),
        ("example.kubernetes.io/x", False),
        ("k8s.io/x", False),
        ("kops.k8s.io/x", True),
        ("karpenter.sh/capacity-type", True),
        ("karpenter.sh/nodepool", True),
        ("karpenter.sh/provisioner-name", False),
        ("karpenter.k8s.aws/instance-family", True),
        ("team", True),
    ],
)
def test_requirement_keys_follow_the_crd_restrictions(key: str, allowed: bool) -> None:
    assert nc.allowed_key(key) is allowed


# -- conditions ------------------------------------------------------------------------------------


def test_a_launched_claim_awaits_the_rest() -> None:
    conditions = nc.launched(now=T0)
    assert kinds(conditions) == {
        "Launched": ("True", "Launched"),
        "Ready": ("Unknown", "AwaitingReconciliation"),
    }


def test_launched_registered_initialized_in_turn_then_ready() -> None:
    c = nc.launched(now=T0)
    c = nc.lifecycle(c, None, now=T0)
    assert kinds(c)["Registered"] == ("Unknown", "NodeNotFound")
    assert kinds(c)["Initialized"] == ("Unknown", "NotRegistered")
    c = nc.lifecycle(c, node(ready=None), now=T0)  # karpy wrote the Node; kubelet has not joined
    assert kinds(c)["Registered"] == ("Unknown", "NodeNotJoined")
    c = nc.lifecycle(c, node(ready=False, reason="KubeletNotReady"), now=T1)
    assert kinds(c)["Registered"] == ("True", "Registered")
    assert kinds(c)["Initialized"] == ("Unknown", "NodeNotReady")
    assert kinds(c)["Ready"] == ("Unknown", "NodeNotReady")
    c = nc.lifecycle(c, node(), now=T2)
    assert kinds(c) == {
        "Launched": ("True", "Launched"),
        "Registered": ("True", "Registered"),
        "Initialized": ("True", "Initialized"),
        "Ready": ("True", "Ready"),
    }
    times = {x.type: x.last_transition_time for x in c}
    assert times["Launched"] < times["Registered"] < times["Initialized"] == times["Ready"]
    assert [x.type for x in c] == sorted(x.type for x in c)


def test_a_node_never_updated_by_a_kubelet_has_not_joined() -> None:
    c = nc.lifecycle(nc.launched(now=T0), node(ready=False, reason="NodeStatusNeverUpdated"), now=T0)
    assert kinds(c)["Registered"] == ("Unknown", "NodeNotJoined")


@pytest.mark.parametrize(
    ("taints", "allocatable", "reason", "message"),
    [
        (
            [{"key": wk.NOT_READY_TAINT_KEY, "effect": "NoSchedule"}],
            None,
            "KnownEphemeralTaintsExist",
            'KnownEphemeralTaint "karpenter.sh/not-ready:NoSchedule" still exists',
        ),
        (
            [{"key": "node.cilium.io/agent-not-ready", "value": "true", "effect": "NoExecute"}],
            None,
            "StartupTaintsExist",
            'StartupTaint "node.cilium.io/agent-not-ready=true:NoExecute" still exists',
        ),
        (
            [],
            {"cpu": "2", "memory": "8Gi"},
            "ResourceNotRegistered",
            'Resource "nvidia.com/gpu" was requested but not registered',
        ),
    ],
)
def test_initialized_waits_for_startup_taints_ephemeral_taints_and_requested_resources(
    taints: list[dict[str, str]], allocatable: dict[str, str] | None, reason: str, message: str
) -> None:
    startup = (Taint("node.cilium.io/agent-not-ready", "NoExecute", "true"),)
    requests = Resources.parse({"cpu": "1", "nvidia.com/gpu": "1"}) if allocatable else Resources.of(cpu=1)
    c = nc.lifecycle(
        nc.launched(now=T0),
        node(taints=taints, allocatable=allocatable or ALLOCATABLE),
        startup_taints=startup,
        requests=requests,
        now=T1,
    )
    initialized = nc.get(c, "Initialized")
    assert initialized is not None
    assert (initialized.status, initialized.reason, initialized.message) == ("Unknown", reason, message)


def test_once_true_registered_and_initialized_stay_true() -> None:
    c = nc.lifecycle(nc.launched(now=T0), node(), now=T0)
    again = nc.lifecycle(c, node(ready=False, reason="KubeletNotReady"), now=T2)
    assert again == c  # nothing rewritten: Karpenter reconciles them only until they are True


def test_transition_time_moves_only_with_the_status() -> None:
    c = nc.set_condition(nc.launched(now=T0), "Drifted", "True", "NodePoolDrifted", now=T0)
    c = nc.set_condition(c, "Drifted", "True", "AMIDrift", now=T1)
    drifted = nc.get(c, "Drifted")
    assert drifted is not None and drifted.reason == "AMIDrift"
    assert drifted.last_transition_time == "2026-01-01T12:00:00Z"
    same = nc.set_condition(c, "Drifted", "True", "AMIDrift", now=T2)
    assert same == c


def test_drifted_and_consolidatable_exist_only_while_they_hold() -> None:
    ready = nc.lifecycle(nc.launched(now=T0), node(), now=T0)
    c = nc.set_condition(ready, "Drifted", "True", "RequirementsDrifted", "RequirementsDrifted", now=T1)
    c = nc.set_condition(c, "Consolidatable", "True", now=T1)
    assert kinds(c)["Drifted"] == ("True", "RequirementsDrifted")
    assert kinds(c)["Consolidatable"] == ("True", "Consolidatable")
    assert kinds(c)["Ready"] == ("True", "Ready")  # neither is part of Ready
    c = nc.clear_condition(nc.clear_condition(c, "Drifted", now=T2), "Consolidatable", now=T2)
    assert c == ready


def test_a_false_lifecycle_condition_makes_ready_false() -> None:
    c = nc.lifecycle(nc.launched(now=T0), None, now=T0)
    c = nc.set_condition(c, "Registered", "False", "MultipleNodesFound", "Invariant violated", now=T1)
    assert kinds(c)["Ready"] == ("False", "MultipleNodesFound")


def test_conditions_round_trip_through_the_api_json() -> None:
    c = nc.lifecycle(nc.launched(now=T0), node(), now=T1)
    claim = {"status": nc.launch_status(node(), c)}
    assert nc.conditions_of(claim) == c


def test_record_reads_what_gc_needs() -> None:
    record = nc.Record.from_manifest(
        {
            "metadata": {"name": "general-0abc", "creationTimestamp": "2026-01-01T12:00:00Z"},
            "status": {"providerID": "aws:///us-west-2a/i-0abc", "nodeName": "n1"},
        }
    )
    assert record == nc.Record("general-0abc", "aws:///us-west-2a/i-0abc", "n1", T0)
    assert nc.Record.from_manifest({"metadata": {"name": "x"}}) == nc.Record("x")
