"""Issue 25's drift proofs on the local control plane + moto: provisioning, lifecycle and the
extender run in this process (test_lifecycle's harness) against kube-apiserver/kube-scheduler/kwok
and moto.

Each drifting Provisioner's nodes hold one pod each (required hostname anti-affinity), so every
replacement is a launch. What the API server shows is folded over every watch event
(observed.py): at most `budget` of a Provisioner's nodes cordoned at once, no pod pending longer
than a launch, and the nodes of an unchanged Provisioner never cordoned or deleted.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from kubernetes import client

from extender.api import labels as wk
from extender.api.nodeclass import AMI_ID_ANNOTATION
from extender.api.provisioner import Provisioner
from hack.localcluster.awsseed import aws_client, ssm_image_path
from tests.integration import test_consolidation
from tests.integration.helpers import unique, wait_for
from tests.integration.lifecycle_harness import (  # noqa: F401 (karpy is a fixture)
    Karpy,
    deployment,
    karpy,
    live_pods,
    messages,
)
from tests.integration.observed import Objects, Observed
from tests.integration.test_consolidation import PENDING_LIMIT, Pending, consolidating, cordoned, nodes_of

pytestmark = pytest.mark.integration

# test_consolidation's fixture, used by name in the tests below.
observed = test_consolidation.observed

#: Launch + Ready on kwok for each node in turn, behind a budget of one: generous, but bounded.
SETTLE = 240
#: The first launches.
UP = 90
AMD64 = ["c5.large", "c5.xlarge"]


def current_ami(cloud: Any, provisioner: str) -> str:
    """The AMI a new amd64 node of the Provisioner would boot now (what AMI drift compares)."""
    prov = Provisioner(name=provisioner)
    itype = next(t for t in cloud.get_instance_types(prov) if t.name == AMD64[0])
    return str(cloud.image_id(prov, itype))


@pytest.fixture(scope="module")
def drifting(karpy: Karpy) -> Karpy:  # noqa: F811
    lifecycle = karpy.settings.lifecycle
    # Every node is looked at every 2 s (drift is checked then; Karpenter: every 5 min), and only
    # the Provisioners' budgets limit how many are replaced at once.
    lifecycle.resync_seconds = 2.0
    lifecycle.max_disrupting = 100
    return karpy


def spread_app(apps: Any, namespace: str, app: str, prov: str, replicas: int) -> None:
    """`replicas` pods of the Provisioner, one per node (required hostname anti-affinity)."""
    anti = [{"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": wk.HOSTNAME}]
    affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": anti}}
    deployment(apps, namespace, app, prov, replicas, cpu="500m", affinity=affinity)


def running(core: Any, namespace: str, app: str, count: int) -> dict[str, str]:
    """pod -> node when exactly `count` pods of the app are Running (else {})."""
    pods = live_pods(core, namespace, app)
    placed = {
        p.metadata.name: p.spec.node_name for p in pods if p.spec.node_name and p.status.phase == "Running"
    }
    return placed if len(pods) == count and len(placed) == count else {}


def drifting_provisioner(
    kube: Any, name: str, budget: str, types: list[str] = AMD64, arch: str = "amd64", **spec: Any
) -> None:
    arches = ({"key": wk.ARCH, "operator": "In", "values": [arch]},)
    consolidating(kube, name, enabled=False, budget=budget, types=types, more=arches, **spec)


def patch_spec(kube: Any, name: str, spec: dict[str, Any]) -> None:
    client.CustomObjectsApi(kube).patch_cluster_custom_object(
        "karpenter.sh", "v1alpha5", "provisioners", name, {"spec": spec}
    )


def names(nodes: list[Any]) -> set[str]:
    return {n.metadata.name for n in nodes}


def untouched(names_: set[str]) -> Any:
    """An Observed figure: how many of `names_` are missing, cordoned or being deleted."""

    def figure(nodes: Objects) -> int:
        return sum(
            1
            for name in names_
            if name not in nodes
            or nodes[name].spec.unschedulable
            or nodes[name].metadata.deletion_timestamp is not None
        )

    return figure


def replaced(core: Any, prov: str, old: set[str], count: int, namespace: str, app: str) -> Any:
    def check() -> Any:
        nodes = [n for n in nodes_of(core, prov)]
        fresh = names(nodes) - old
        return len(nodes) == count and len(fresh) == count and running(core, namespace, app, count) and nodes

    return check


def test_a_new_ami_in_ssm_drifts_and_replaces_nodes_within_the_budget(
    drifting: Karpy, core_v1: Any, apps_v1: Any, namespace: str, observed: list[Observed], caplog: Any
) -> None:
    caplog.set_level("INFO", logger="karpy")
    prov, steady = unique("ami"), unique("arm")
    drifting_provisioner(drifting.kube, prov, "1")
    # arm64 nodes boot the arm64 AMI, whose parameter does not change: never touched.
    drifting_provisioner(drifting.kube, steady, "100%", types=["m6g.large"], arch="arm64")
    spread_app(apps_v1, namespace, "web", prov, 3)
    spread_app(apps_v1, namespace, "arm", steady, 1)
    wait_for(lambda: running(core_v1, namespace, "web", 3), UP, "3 web pods Running")
    wait_for(lambda: running(core_v1, namespace, "arm", 1), UP, "the arm pod Running")
    before, kept = nodes_of(core_v1, prov), names(nodes_of(core_v1, steady))
    old_ami = {(n.metadata.annotations or {})[AMI_ID_ANNOTATION] for n in before}
    assert len(before) == 3 and len(old_ami) == 1 and len(kept) == 1
    of_prov = {"label_selector": f"{wk.PROVISIONER_NAME}={prov}"}
    observed.append(Observed(core_v1.list_node, cordoned, max, **of_prov))
    observed.append(
        Observed(core_v1.list_namespaced_pod, Pending(), max, namespace=namespace, label_selector="app=web")
    )
    observed.append(
        Observed(core_v1.list_node, untouched(kept), max, label_selector=f"{wk.PROVISIONER_NAME}={steady}")
    )

    settings = drifting.settings.aws
    ec2 = aws_client("ec2", settings.endpoint_url, settings.region)
    ssm = aws_client("ssm", settings.endpoint_url, settings.region)
    path = ssm_image_path(settings.ssm_root, settings.kubernetes_version, "amd64")
    original = ssm.get_parameter(Name=path)["Parameter"]["Value"]
    assert {original} == old_ami
    new_ami = ec2.register_image(
        Name=unique("eks-node-next"), Architecture="x86_64", RootDeviceName="/dev/xvda"
    )["ImageId"]
    ssm.put_parameter(Name=path, Value=new_ami, Type="String", DataType="aws:ec2:image", Overwrite=True)
    try:
        # The provider caches SSM answers for 60 s: the drift shows within that plus a resync.
        after = wait_for(
            replaced(core_v1, prov, names(before), 3, namespace, "web"),
            SETTLE + 60,
            "3 new nodes, pods Running",
        )
        assert {(n.metadata.annotations or {})[AMI_ID_ANNOTATION] for n in after} == {new_ami}
        max_cordoned, pending, disturbed = (o.stop() for o in observed)
        assert max_cordoned == 1, f"{max_cordoned} nodes cordoned at once (budget 1)"
        assert pending is not None and pending <= PENDING_LIMIT, f"a pod was pending {pending}s"
        assert disturbed == 0, "a node of the unchanged (arm64) Provisioner was cordoned or deleted"
        assert names(nodes_of(core_v1, steady)) == kept
        log = messages(caplog)
        for name in names(before):
            assert f"Marked node {name} drifted, AMIDrift (provisioner {prov})" in log, log
            assert any(
                m.startswith(f"Triggering termination for drifted node {name} (AMIDrift)") for m in log
            )
        events = core_v1.list_event_for_all_namespaces(field_selector="reason=Drifted").items
        assert names(before) <= {e.involved_object.name for e in events}
    finally:
        # The new nodes would drift back once the original is published again: take them away first.
        apps_v1.delete_namespaced_deployment("web", namespace)
        try:
            for node in nodes_of(core_v1, prov):
                core_v1.delete_node(node.metadata.name)
            wait_for(lambda: not nodes_of(core_v1, prov), 60, "the drift test's nodes gone")
        finally:
            # Even when those nodes outstay the wait: left on the new AMI, every later launch of the
            # session boots it and the amd64 nodes already up read as AMI-drifted to later lifecycles.
            ssm.put_parameter(
                Name=path, Value=original, Type="String", DataType="aws:ec2:image", Overwrite=True
            )
        # Later launches (and tests) must see the original again: wait out the provider's cache.
        wait_for(
            lambda: current_ami(drifting.cloud, prov) == original,
            90,
            "the provider resolving the original AMI",
        )


def test_labels_drift_nodes_limits_and_weight_do_not_and_other_provisioners_are_untouched(
    drifting: Karpy, core_v1: Any, apps_v1: Any, namespace: str, observed: list[Observed], caplog: Any
) -> None:
    caplog.set_level("INFO", logger="karpy")
    prov, steady = unique("labels"), unique("steady")
    drifting_provisioner(drifting.kube, prov, "1", labels={"tier": "a"})
    drifting_provisioner(drifting.kube, steady, "100%")
    spread_app(apps_v1, namespace, "web", prov, 2)
    spread_app(apps_v1, namespace, "other", steady, 1)
    wait_for(lambda: running(core_v1, namespace, "web", 2), UP, "2 web pods Running")
    wait_for(lambda: running(core_v1, namespace, "other", 1), UP, "the other pod Running")
    before, kept = names(nodes_of(core_v1, prov)), names(nodes_of(core_v1, steady))
    of_prov = {"label_selector": f"{wk.PROVISIONER_NAME}={prov}"}
    of_steady = {"label_selector": f"{wk.PROVISIONER_NAME}={steady}"}
    still = Observed(core_v1.list_node, untouched(before), max, **of_prov)
    observed.append(Observed(core_v1.list_node, untouched(kept), max, **of_steady))

    # Limits and weight do not shape a node: several resyncs and Provisioner re-reads change nothing.
    patch_spec(drifting.kube, prov, {"limits": {"resources": {"cpu": "100"}}, "weight": 42})
    time.sleep(15)
    assert still.stop() == 0, "a node was cordoned or deleted after a limits/weight change"
    assert names(nodes_of(core_v1, prov)) == before
    assert not any("drifted" in m for m in messages(caplog) if prov in m)

    observed.append(Observed(core_v1.list_node, cordoned, max, **of_prov))
    observed.append(
        Observed(core_v1.list_namespaced_pod, Pending(), max, namespace=namespace, label_selector="app=web")
    )
    patch_spec(drifting.kube, prov, {"labels": {"tier": "b"}})
    after = wait_for(
        replaced(core_v1, prov, before, 2, namespace, "web"), SETTLE, "2 new nodes, pods Running"
    )
    assert {n.metadata.labels["tier"] for n in after} == {"b"}
    disturbed, max_cordoned, pending = (o.stop() for o in observed)
    assert disturbed == 0, "a node of the unchanged Provisioner was cordoned or deleted"
    assert max_cordoned == 1, f"{max_cordoned} nodes cordoned at once (budget 1)"
    assert pending is not None and pending <= PENDING_LIMIT, f"a pod was pending {pending}s"
    log = messages(caplog)
    for name in before:
        assert f"Marked node {name} drifted, ProvisionerDrifted (provisioner {prov})" in log
    apps_v1.delete_namespaced_deployment("web", namespace)
