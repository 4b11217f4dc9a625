"""docs/scheduler-path.md, step 3, on the local control plane + moto: with the shipped scheduler
config ordinary pods are no longer sent to karpy's extender, so nothing keeps kube-scheduler from
binding a pod karpy has claimed for a batch. When kube-scheduler wins, karpy's own bind meets the
conflict (409, the pod is bound) and leaves the pod where it is, as Karpenter v0.5 did, binding
without a guard; the node launched for it comes up empty and emptiness removes it.
Provisioning, the lifecycle and the extender run in this process (lifecycle_harness)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from extender.api import labels as wk
from extender.cluster import events
from tests.integration import lifecycle_harness
from tests.integration.helpers import all_bound, create_pods, pod_manifest, unique, wait_for
from tests.integration.lifecycle_harness import Karpy, messages, node_or_none, provisioner, ready_untainted

pytestmark = pytest.mark.integration

karpy = lifecycle_harness.karpy
lifecycle_log = lifecycle_harness.lifecycle_log

#: Launch, Node create, kwok's Ready, the not-ready taint lifted, 5 s of emptiness, termination.
EMPTY_SECONDS = 120


def test_a_claimed_pod_kube_scheduler_binds_first_leaves_the_node_launched_for_it_to_emptiness(
    karpy: Karpy, core_v1: Any, namespace: str, lifecycle_log: pytest.LogCaptureFixture
) -> None:
    prov = unique("race")
    provisioner(
        karpy.kube,
        prov,
        [{"key": wk.INSTANCE_TYPE, "operator": "In", "values": ["m5.large"]}],
        ttlSecondsAfterEmpty=5,
    )
    selector = {wk.PROVISIONER_NAME: prov}
    create_pods(core_v1, namespace, [pod_manifest("seed", "1", selector=selector)])
    old = wait_for(all_bound(core_v1, namespace, 1), 90, "seed bound")[0].spec.node_name
    wait_for(lambda: ready_untainted(core_v1, old), 60, "seed's node Ready and untainted")
    # Cordoned, the only node with room makes the next pod unschedulable: karpy claims it.
    core_v1.patch_node(old, {"spec": {"unschedulable": True}})
    raced: list[str] = []

    def kube_scheduler_first(parsed: dict, **_: Any) -> None:
        """Between karpy's launch and its bind: the old node takes pods again, and kube-scheduler
        binds the claimed pod there before karpy's launch returns."""
        if raced or not parsed.get("Instances"):
            return
        raced.append("launched")
        core_v1.patch_node(old, {"spec": {"unschedulable": None}})
        deadline = time.monotonic() + 60
        while (
            time.monotonic() < deadline and not core_v1.read_namespaced_pod("racer", namespace).spec.node_name
        ):
            time.sleep(0.2)

    karpy.ec2.meta.events.register("after-call.ec2.CreateFleet", kube_scheduler_first)
    try:
        create_pods(core_v1, namespace, [pod_manifest("racer", "100m", selector=selector)])
        racer = wait_for(
            lambda: (p := core_v1.read_namespaced_pod("racer", namespace)).spec.node_name and p,
            90,
            "racer bound",
        )
        launched = wait_for(
            lambda: [
                n.metadata.name
                for n in core_v1.list_node(label_selector=f"{wk.PROVISIONER_NAME}={prov}").items
                if n.metadata.name != old
            ],
            60,
            "the node karpy launched for the racer",
        )
    finally:
        karpy.ec2.meta.events.unregister("after-call.ec2.CreateFleet", kube_scheduler_first)
    assert raced and racer.spec.node_name == old, "kube-scheduler did not win the race"
    (new,) = launched
    wait_for(lambda: node_or_none(core_v1, new) is None, EMPTY_SECONDS, "the empty launched node removed")
    log = messages(lifecycle_log)
    assert any(line.startswith(f"Pod {namespace}/racer already bound") for line in log), log
    assert f"Triggering termination after 5s for empty node {new}" in log
    # Nothing launched again for it: the racer stays on the old node, the only one left.
    nodes = core_v1.list_node(label_selector=f"{wk.PROVISIONER_NAME}={prov}").items
    assert [n.metadata.name for n in nodes] == [old]
    assert core_v1.read_namespaced_pod("racer", namespace).spec.node_name == old


def test_a_batchs_new_node_keeps_its_not_ready_taint_from_its_create_to_the_batchs_binds(
    karpy: Karpy, core_v1: Any, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kwok makes a Node Ready within milliseconds of its create. The batch's mark was set after
    `register` returned, and the LaunchedNode Event is written in between: readiness lifted the
    not-ready taint there, so kube-scheduler could place a pod of the batch beside karpy's binds
    (the walkthrough's 4 + 1 on two c5.xlarge, CI at stop 42). Here the Event waits until kwok has
    made the node Ready and readiness has had 3 s; the taint must still be on."""
    prov = unique("hold")
    provisioner(karpy.kube, prov, [{"key": wk.INSTANCE_TYPE, "operator": "In", "values": ["m5.large"]}])
    tainted_when_ready: list[bool] = []
    record = events.record

    def slow_launched_event(kube: Any, **kwargs: Any) -> None:
        if kwargs.get("reason") == "LaunchedNode" and kwargs.get("name") == prov:
            node = kwargs["message"].split()[2]
            ready = wait_for(
                lambda: (
                    (n := node_or_none(core_v1, node))
                    and any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])
                    and n
                ),
                30,
                f"kwok to make {node} Ready",
            )
            time.sleep(3)  # readiness reconciles a node within a second of its watch event
            taints = core_v1.read_node(ready.metadata.name).spec.taints or []
            tainted_when_ready.append(any(t.key == wk.NOT_READY_TAINT_KEY for t in taints))
        record(kube, **kwargs)

    monkeypatch.setattr(events, "record", slow_launched_event)
    selector = {wk.PROVISIONER_NAME: prov}
    create_pods(core_v1, namespace, [pod_manifest("held", "1", selector=selector)])
    (pod,) = wait_for(all_bound(core_v1, namespace, 1), 120, "the pod bound")
    assert tainted_when_ready == [True]
    # Lifted once the batch is done.
    wait_for(lambda: ready_untainted(core_v1, pod.spec.node_name), 60, "the taint lifted after the batch")
