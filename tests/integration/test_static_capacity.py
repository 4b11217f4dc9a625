"""Static NodePools (`spec.replicas`) on the local control plane + moto: a real `karpenter.sh/v1`
NodePool with its EC2NodeClass (helpers.nodepool), stored through the CRD (its scale subresource,
`specReplicasPath: .spec.replicas`), and karpy's provisioning controller and lifecycle in this
process (lifecycle_harness). The rules are Karpenter's static controllers
(kubernetes-sigs/karpenter pkg/controllers/static/{provisioning,deprovisioning}; unit-proven in
tests/unit/provisioning/test_static_decide.py and tests/unit/scheduling/test_static_pools.py):

- replicas 3 and no pod at all: 3 Nodes, of the cheapest type the requirements allow;
- `kubectl scale nodepools.karpenter.sh NAME --replicas 5` (the cached kubectl binary, which
  patches the scale subresource): exactly 5; then `--replicas 1`: exactly 1, the removed nodes gone
  through the termination path (Node deleted, instance terminated);
- the pool asks for aggressive consolidation (WhenEmptyOrUnderutilized, 0s) and its empty nodes
  still stay;
- drift (a template label edit) replaces its nodes, one at a time under a budget of 1.
Every wait is bounded; the figures are printed."""

from __future__ import annotations

import os
import subprocess
import time
from typing import Any

import pytest
from kubernetes import client

from extender.api import labels as wk
from hack.localcluster import build
from tests.integration.helpers import nodepool, unique, wait_for
from tests.integration.lifecycle_harness import (  # noqa: F401 (karpy is a fixture)
    Karpy,
    instance_of,
    instance_state,
    karpy,
    node_or_none,
)
from tests.integration.test_consolidation import nodes_of
from tests.integration.test_disruption_controls import ON_DEMAND, fast  # noqa: F401 (fast is a fixture)

pytestmark = pytest.mark.integration

CONSOLIDATE_NOW = {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"}
#: Each step's bound: the brief asks for the whole scale-up/down under 2 minutes.
STEP_SECONDS = 60


def scale(kube: Any, name: str, replicas: int) -> None:
    """What `kubectl scale nodepool NAME --replicas N` sends: a patch of the scale subresource."""
    client.CustomObjectsApi(kube).patch_cluster_custom_object_scale(
        "karpenter.sh", "v1", "nodepools", name, {"spec": {"replicas": replicas}}
    )


def kubectl_scale(kubeconfig: str, name: str, replicas: int) -> None:
    """`kubectl scale` itself, with the kubectl the local cluster was built with."""
    done = subprocess.run(
        [
            str(build.binary("kubectl")),
            f"--kubeconfig={kubeconfig}",
            "scale",
            "nodepools.karpenter.sh",
            name,
            f"--replicas={replicas}",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert f"nodepool.karpenter.sh/{name} scaled" in done.stdout, done.stdout


def live(core: Any, name: str) -> list[Any]:
    return nodes_of(core, name, wk.NODEPOOL)


def exactly(core: Any, name: str, count: int, what: str) -> list[Any]:
    """Wait until the pool has `count` live nodes and no node of it is still deleting; those nodes."""
    found: list[Any] = []

    def check() -> bool:
        every = core.list_node(label_selector=f"{wk.NODEPOOL}={name}").items
        found[:] = [n for n in every if n.metadata.deletion_timestamp is None]
        return len(found) == count == len(every)

    wait_for(check, STEP_SECONDS, what)
    return found


def pods_on(core: Any, node: str) -> list[Any]:
    return core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items


def delete_pool(kube: Any, name: str) -> None:
    objects = client.CustomObjectsApi(kube)
    objects.delete_cluster_custom_object("karpenter.sh", "v1", "nodepools", name)
    objects.delete_cluster_custom_object("karpenter.k8s.aws", "v1", "ec2nodeclasses", name)


def test_a_static_nodepool_keeps_its_replicas_and_follows_kubectl_scale(
    fast: Karpy,  # noqa: F811
    core_v1: Any,
    cluster: Any,
) -> None:
    name = unique("static")
    started = time.monotonic()
    nodepool(fast.kube, name, fast.settings.cluster_name, ON_DEMAND, disruption=CONSOLIDATE_NOW, replicas=3)
    try:
        three = exactly(core_v1, name, 3, "3 nodes for replicas 3")
        up = time.monotonic() - started
        # No pod asked for them; the cheapest type the requirements allow (c5.large of ON_DEMAND's).
        assert all(not pods_on(core_v1, n.metadata.name) for n in three)
        assert {n.metadata.labels[wk.INSTANCE_TYPE] for n in three} == {"c5.large"}
        kubectl_scale(cluster.kubeconfig, name, 5)
        t0 = time.monotonic()
        five = exactly(core_v1, name, 5, "5 nodes after scaling to 5")
        to_five = time.monotonic() - t0
        assert {n.metadata.name for n in three} <= {n.metadata.name for n in five}
        # Consolidation runs every second and may take empty nodes at once; a static pool's stay.
        time.sleep(5)
        assert {n.metadata.name for n in live(core_v1, name)} == {n.metadata.name for n in five}
        kubectl_scale(cluster.kubeconfig, name, 1)
        t0 = time.monotonic()
        one = exactly(core_v1, name, 1, "1 node after scaling to 1")
        to_one = time.monotonic() - t0
        removed = [n for n in five if n.metadata.name != one[0].metadata.name]
        assert len(removed) == 4 and all(node_or_none(core_v1, n.metadata.name) is None for n in removed)
        wait_for(
            lambda: all(
                instance_state(fast, instance_of(n)) in ("shutting-down", "terminated") for n in removed
            ),
            STEP_SECONDS,
            "the removed nodes' instances terminated",
        )
        total = time.monotonic() - started
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        print(
            f"static nodepool: 3 nodes in {up:.1f}s, 3->5 in {to_five:.1f}s, 5->1 in {to_one:.1f}s,"
            f" {total:.1f}s in all (load {load})"
        )
        assert total < 120  # a hang guard, the brief's bound
        scale(fast.kube, name, 0)
        exactly(core_v1, name, 0, "no node after scaling to 0")
    finally:
        delete_pool(fast.kube, name)


def test_drift_replaces_a_static_pools_nodes_one_at_a_time(fast: Karpy, core_v1: Any) -> None:  # noqa: F811
    name = unique("static-drift")
    disruption = {**CONSOLIDATE_NOW, "budgets": [{"nodes": "1"}]}
    nodepool(
        fast.kube,
        name,
        fast.settings.cluster_name,
        ON_DEMAND,
        disruption=disruption,
        replicas=2,
        labels={"tier": "a"},
    )
    try:
        before = {n.metadata.name for n in exactly(core_v1, name, 2, "2 nodes for replicas 2")}
        client.CustomObjectsApi(fast.kube).patch_cluster_custom_object(
            "karpenter.sh",
            "v1",
            "nodepools",
            name,
            {"spec": {"template": {"metadata": {"labels": {"tier": "b"}}}}},
        )
        most_deleting = 0

        def replaced() -> bool:
            nonlocal most_deleting
            every = core_v1.list_node(label_selector=f"{wk.NODEPOOL}={name}").items
            deleting = [n for n in every if n.metadata.deletion_timestamp is not None]
            most_deleting = max(most_deleting, len(deleting))
            fresh = [
                n for n in every if n.metadata.deletion_timestamp is None and n.metadata.name not in before
            ]
            return (
                len(fresh) == 2
                and len(every) == 2
                and all(n.metadata.labels.get("tier") == "b" for n in fresh)
            )

        t0 = time.monotonic()
        wait_for(replaced, 2 * STEP_SECONDS, "both drifted static nodes replaced")
        print(f"static nodepool drift: 2 nodes replaced in {time.monotonic() - t0:.1f}s")
        assert most_deleting <= 1  # the budget of 1: one at a time
        scale(fast.kube, name, 0)
        exactly(core_v1, name, 0, "no node after scaling to 0")
    finally:
        delete_pool(fast.kube, name)
