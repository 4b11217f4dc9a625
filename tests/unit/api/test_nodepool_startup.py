"""NodePool `spec.template.spec.startupTaints` and `spec.template.metadata.annotations`: loaded into
the Provisioner, put on the node (and NodeClaim) at launch, hashed for drift, and left out of what
the solver sees (Karpenter's semantics: pkg/apis/v1/nodeclaim.go StartupTaints, docs concepts/nodepools
"startupTaints": pods need not tolerate them; pkg/apis/v1/nodepool.go Hash covers the template)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from functools import partial
from typing import Any

import pytest
from marshmallow import ValidationError

from extender.api import labels as wk
from extender.api import nodeclaim as nc
from extender.api.migrate import convert
from extender.api.node import Condition, Node, format_taints, parse_taints
from extender.api.nodepool import load_nodepool
from extender.api.provisioner import Taint
from extender.api.provisioner_hash import node_shape, provisioner_hash
from extender.api.resources import Resources
from extender.cloud.types import Instance
from extender.cluster import inventory
from extender.provisioning import launcher
from extender.scheduling.solver import solve
from tests import builders
from tests.unit.scheduling.builders import catalog

CILIUM = {"key": "node.cilium.io/agent-not-ready", "value": "true", "effect": "NoExecute"}
EBS = {"key": "ebs.csi.aws.com/agent-not-ready", "effect": "NoSchedule"}
NOTES = {"example.com/owner": "team-a", "karpenter.sh/do-not-disrupt": "true"}


#: The NodePool here: tainted dedicated=web, nodes labelled team=a; give it `startup_taints` and
#: template `annotations`.
pool = partial(
    builders.nodepool_manifest,
    "np",
    uid="np-uid",
    labels={"team": "a"},
    taints=[{"key": "dedicated", "value": "web", "effect": "NoSchedule"}],
)


def test_startup_taints_and_template_annotations_land_in_the_model() -> None:
    prov = load_nodepool(pool(startup_taints=[CILIUM, EBS], annotations=NOTES))
    assert prov.startup_taints == (
        Taint("node.cilium.io/agent-not-ready", "NoExecute", "true"),
        Taint("ebs.csi.aws.com/agent-not-ready", "NoSchedule"),
    )
    assert prov.annotations == NOTES
    assert prov.taints == (Taint("dedicated", "NoSchedule", "web"),)
    bare = load_nodepool(pool())
    assert bare.startup_taints == () and bare.annotations == {}


def test_bad_startup_taints_and_annotation_keys_are_named() -> None:
    with pytest.raises(ValidationError) as err:
        load_nodepool(
            pool(
                startup_taints=[{"key": "a", "effect": "NoBind"}],
                annotations={"not a key": "x", "ok/key": "y"},
            )
        )
    messages = err.value.messages
    assert any(m.startswith('spec.template.spec.startupTaints[0].effect: "NoBind" not in') for m in messages)
    assert any(
        m.startswith('spec.template.metadata.annotations["not a key"]: invalid key name "not a key"')
        for m in messages
    ), messages
    assert len(messages) == 2, messages


def test_the_solver_plans_a_pod_that_does_not_tolerate_a_startup_taint() -> None:
    """Karpenter docs concepts/nodepools: "pods do not need to tolerate the taint"; a regular taint
    of the same NodePool still has to be tolerated."""
    prov = load_nodepool(pool(startup_taints=[CILIUM]))
    tolerates_dedicated = [{"key": "dedicated", "operator": "Exists"}]
    plan = solve(
        [builders.pod("a", cpu="1", tolerations=tolerates_dedicated), builders.pod("b", cpu="1")],
        [prov],
        catalog(),
    )
    (node,) = plan.nodes
    assert [p.name for p in node.pods] == ["a"] and node.taints == prov.taints
    (refused,) = plan.unschedulable
    assert refused.pod.name == "b" and "dedicated" in refused.reason and "cilium" not in refused.reason


def instance() -> Instance:
    return Instance(
        id="i-0abc",
        instance_type="c5.xlarge",
        zone="us-west-2b",
        capacity_type="on-demand",
        private_dns_name="ip-10-0-0-1.ec2.internal",
        provider_id="",
        state="running",
        tags={},
    )


def launcher_node_manifest(prov: Any) -> dict[str, Any]:
    """The Node manifest karpy's launcher writes for a pod planned on `prov`."""
    tolerates = [{"key": "dedicated", "operator": "Exists"}]
    (planned,) = solve([builders.pod("a", cpu="1", tolerations=tolerates)], [prov], catalog()).nodes
    return launcher.node_for(instance(), planned, prov)


def launched(prov: Any) -> Node:
    return Node.from_manifest(launcher_node_manifest(prov))


def test_the_node_carries_the_startup_taints_and_the_template_annotations() -> None:
    prov = load_nodepool(
        pool(startup_taints=[CILIUM, EBS], annotations={**NOTES, wk.PROVISIONER_HASH_ANNOTATION: "mine"})
    )
    node = launched(prov)
    assert node.taints == (*prov.taints, *prov.startup_taints, launcher.NOT_READY)
    assert node.startup_taints == prov.startup_taints
    annotations = launcher_node_manifest(prov)["metadata"]["annotations"]
    assert {k: annotations[k] for k in NOTES} == NOTES
    # karpy's own stamps win over a template annotation of the same key.
    assert annotations[wk.PROVISIONER_HASH_ANNOTATION] == provisioner_hash(prov)
    assert parse_taints(annotations[wk.STARTUP_TAINTS_ANNOTATION]) == prov.startup_taints


def test_a_node_of_a_pool_without_them_carries_neither() -> None:
    node = launched(load_nodepool(pool()))
    assert wk.STARTUP_TAINTS_ANNOTATION not in node.annotations and node.startup_taints == ()


def test_startup_taints_round_trip_and_only_those_still_on_the_node_count() -> None:
    taints = (Taint("a.io/x", "NoExecute", "true"), Taint("b.io/y", "NoSchedule"))
    assert format_taints(taints) == "a.io/x=true:NoExecute,b.io/y:NoSchedule"
    assert parse_taints(format_taints(taints)) == taints
    assert parse_taints("junk,,c:NoSchedule") == (Taint("c", "NoSchedule"),)
    node = Node(
        name="n",
        labels={wk.NODEPOOL: "np"},
        taints=(Taint("b.io/y", "NoSchedule"), Taint("other", "NoSchedule")),
        annotations={wk.STARTUP_TAINTS_ANNOTATION: format_taints(taints)},
    )
    assert node.startup_taints == (Taint("b.io/y", "NoSchedule"),)


def test_the_solver_view_of_a_karpy_node_leaves_its_startup_taints_out() -> None:
    """Karpenter pkg/controllers/state/statenode.go Taints(): a managed node not yet initialized
    leaves its startup taints (and the known ephemeral ones) out of scheduling."""
    startup = Taint("node.cilium.io/agent-not-ready", "NoExecute", "true")
    regular = Taint("dedicated", "NoSchedule", "web")
    note = {wk.STARTUP_TAINTS_ANNOTATION: format_taints((startup,))}
    ours = Node(name="n", labels={wk.NODEPOOL: "np"}, taints=(regular, startup), annotations=note)
    view = inventory.existing_node(ours, inventory.node_pods([]), schedulable=True)
    assert view.taints == (regular,)
    # Not karpy's node: every taint counts.
    theirs = replace(ours, labels={})
    assert inventory.existing_node(theirs, inventory.node_pods([]), schedulable=False).taints == (
        regular,
        startup,
    )


def test_the_nodeclaim_carries_startup_taints_apart_and_the_template_annotations() -> None:
    prov = load_nodepool(pool(startup_taints=[CILIUM], annotations=NOTES))
    node = launched(prov)
    claim = nc.manifest(prov, node, "i-0abc", requests=Resources())
    assert claim["spec"]["taints"] == [{"key": "dedicated", "effect": "NoSchedule", "value": "web"}]
    assert claim["spec"]["startupTaints"] == [CILIUM | {"value": "true"}]
    assert claim["metadata"]["annotations"] == NOTES
    # Read back, the claim's startup taints keep Initialized Unknown while the node carries them
    # (pkg/controllers/nodeclaim/lifecycle/initialization.go).
    startup = nc.spec_taints(claim, "startupTaints")
    joined = replace(node, ready=True, ready_condition=Condition("True", "KubeletReady"))
    now = datetime(2026, 1, 1, tzinfo=UTC)
    tainted = nc.lifecycle(
        (), replace(joined, taints=(*prov.taints, *startup)), startup_taints=startup, now=now
    )
    initialized = nc.get(tainted, nc.INITIALIZED)
    assert initialized is not None and (initialized.status, initialized.reason) == (
        nc.UNKNOWN,
        "StartupTaintsExist",
    )
    cleared = nc.lifecycle(tainted, replace(joined, taints=prov.taints), startup_taints=startup, now=now)
    initialized = nc.get(cleared, nc.INITIALIZED)
    assert initialized is not None and initialized.status == nc.TRUE


def test_the_hash_covers_them_and_is_unchanged_without_them() -> None:
    """Karpenter pkg/apis/v1/nodepool.go Hash: the template (annotations, taints, startupTaints...)
    with IgnoreZeroValue, so a NodePool without them keeps the hash its nodes were stamped with."""
    bare = load_nodepool(pool())
    assert "startup_taints" not in node_shape(bare) and "annotations" not in node_shape(bare)
    assert provisioner_hash(bare) == provisioner_hash(replace(bare, startup_taints=(), annotations={}))
    with_startup = load_nodepool(pool(startup_taints=[CILIUM]))
    with_notes = load_nodepool(pool(annotations=NOTES))
    hashes = {provisioner_hash(p) for p in (bare, with_startup, with_notes)}
    assert len(hashes) == 3
    assert provisioner_hash(load_nodepool(pool(startup_taints=[EBS, CILIUM]))) == provisioner_hash(
        load_nodepool(pool(startup_taints=[CILIUM, EBS]))
    )


def test_karpy_convert_carries_a_provisioners_startup_taints_into_a_loadable_nodepool() -> None:
    """karpenter-convert copies spec.startupTaints to spec.template.spec.startupTaints (Karpenter
    v0.7+ Provisioners have them; karpy's v1alpha5 loader, after Karpenter 0.5, does not plan them)."""
    provisioner = {
        "apiVersion": "karpenter.sh/v1alpha5",
        "kind": "Provisioner",
        "metadata": {"name": "cni"},
        "spec": {
            "startupTaints": [CILIUM],
            "provider": {"subnetSelector": {"a": "b"}, "securityGroupSelector": {"a": "b"}},
        },
    }
    converted = convert([provisioner], cluster_name="demo")
    (nodepool,) = [o for o in converted.objects if o["kind"] == "NodePool"]
    assert nodepool["spec"]["template"]["spec"]["startupTaints"] == [CILIUM]
    assert load_nodepool(nodepool).startup_taints == (Taint(CILIUM["key"], "NoExecute", "true"),)
    assert not any("startupTaints" in note for note in converted.notes)
