"""NodePool startupTaints and template annotations on the local control plane (real API server,
kube-scheduler, kwok; moto for EC2): karpy launches a node for a pod that does not tolerate the
startup taint, the Node carries the taint and the annotation, the NodeClaim stays not Initialized
while the taint is there (Karpenter's StartupTaintsExist), and once something removes it (here the
test, as a CNI agent would) the claim is Initialized and kube-scheduler binds the pod karpy
nominated to the node.
"""

from __future__ import annotations

from typing import Any

import pytest

from extender.api import labels as wk
from extender.api import nodeclaim as nc
from extender.cluster import nodeclaims
from tests.integration import lifecycle_harness
from tests.integration.helpers import nodepool, unique, wait_for
from tests.integration.lifecycle_harness import Karpy, deployment, live_pods, node_or_none

pytestmark = pytest.mark.integration

karpy = lifecycle_harness.karpy

STARTUP = {"key": "example.com/agent-not-ready", "value": "true", "effect": "NoSchedule"}
NOTE = {"example.com/owner": "team-startup"}


def _claim_of(kube: Any, pool: str) -> dict[str, Any] | None:
    found = [
        c for c in nodeclaims.list_claims(kube) if c["metadata"]["labels"].get(nc.NODEPOOL_LABEL) == pool
    ]
    return found[0] if len(found) == 1 and (found[0].get("status") or {}).get("nodeName") else None


def _initialized(claim: dict[str, Any]) -> nc.Condition | None:
    return nc.get(nc.conditions_of(claim), nc.INITIALIZED)


def test_a_startup_taint_keeps_the_claim_uninitialized_and_the_pod_waits_for_its_removal(
    karpy: Karpy, core_v1: Any, apps_v1: Any, namespace: str
) -> None:
    pool = unique("np-startup")
    nodepool(
        karpy.kube,
        pool,
        karpy.settings.cluster_name,
        [{"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}],
        annotations=NOTE,
        empty_after="2s",
        startupTaints=[STARTUP],
    )
    deployment(apps_v1, namespace, "starting", pool, 1, owner_label=wk.NODEPOOL)

    claim = wait_for(lambda: _claim_of(karpy.kube, pool), 90, "a node launched for the pod")
    name = claim["status"]["nodeName"]
    assert claim["spec"]["startupTaints"] == [STARTUP]
    assert STARTUP not in claim["spec"]["taints"]
    assert claim["metadata"]["annotations"] == NOTE

    # karpy writes the claim (with its nodeName) just before the Node, so a busy machine may show
    # the claim first.
    node = wait_for(lambda: node_or_none(core_v1, name), 30, "the claim's Node created")
    assert node.metadata.annotations["example.com/owner"] == "team-startup"
    taints = [{"key": t.key, "value": t.value, "effect": t.effect} for t in node.spec.taints or ()]
    assert STARTUP in taints

    # Registered (kwok's kubelet reports Ready, karpy lifts its not-ready taint), but the startup
    # taint keeps Initialized Unknown; the pod, which does not tolerate it, is not bound meanwhile.
    def waiting_on_startup() -> nc.Condition | None:
        current = nodeclaims.read(karpy.kube, claim["metadata"]["name"])
        condition = _initialized(current) if current else None
        return condition if condition is not None and condition.reason == "StartupTaintsExist" else None

    condition = wait_for(waiting_on_startup, 60, "Initialized waiting on the startup taint")
    assert condition.status == "Unknown"
    assert 'StartupTaint "example.com/agent-not-ready=true:NoSchedule" still exists' in condition.message
    wait_for(
        lambda: not any(t.key == wk.NOT_READY_TAINT_KEY for t in core_v1.read_node(name).spec.taints or ()),
        60,
        "karpy's not-ready taint lifted",
    )
    (pod,) = live_pods(core_v1, namespace, "starting")
    assert not pod.spec.node_name, "bound past a startup taint it does not tolerate"

    # The agent is up: the taint goes, the claim is Initialized, kube-scheduler binds the pod there.
    kept = [t for t in core_v1.read_node(name).spec.taints or () if t.key != STARTUP["key"]]
    core_v1.patch_node(
        name, {"spec": {"taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in kept]}}
    )

    def initialized() -> bool:
        current = nodeclaims.read(karpy.kube, claim["metadata"]["name"])
        condition = _initialized(current) if current else None
        return condition is not None and condition.status == "True"

    wait_for(initialized, 60, "Initialized once the startup taint is gone")
    bound = wait_for(
        lambda: (ps := live_pods(core_v1, namespace, "starting")) and ps[0].spec.node_name,
        60,
        "the pod bound by kube-scheduler",
    )
    assert bound == name

    apps_v1.delete_namespaced_deployment("starting", namespace)
    wait_for(lambda: node_or_none(core_v1, name) is None, 60, "the empty node deleted")
