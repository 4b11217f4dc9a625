"""`karpy explain` on the local control plane + moto (issue 34): four pools (three Provisioners and
a NodePool) and eight pods pending for eight distinct reasons (arch, zone, taint, limit, too big,
unknown resource, minValues, anti-affinity). `karpy explain pod --all-pending -o json`, run live
through the cluster adapters, must name each pool's first rule and a change; the test applies that
change (the pod recreated under a new name with the pod edit, or the pool patched and the pod
recreated unchanged, so the parking backoff of the old one plays no part) and the pod is bound.
A pod pending across retries has ONE FailedProvisioning Event whose count rose, in explain's words.

The provisioning worker runs in this process (the `karpy` fixture); `karpy explain` runs in-process
through `extender.cli.main`, with the KARPY_* environment a controller of this cluster has.
"""

from __future__ import annotations

import copy
from functools import partial
from typing import Any

import pytest

from extender.api import labels as wk
from tests import builders
from tests.integration.helpers import (
    Karpy,
    create_pods,
    karpy_cli_json,
    nodepool,
    provisioner,
    unique,
    wait_for,
)

pytestmark = pytest.mark.integration

TAG = "karpy.test/explain"
BIND_SECONDS = 90


#: An inflate pod (tests/integration/helpers.pod_manifest's); give it `cpu` and a `nodeSelector`.
_pod = partial(builders.pod_manifest, **builders.INFLATE)


def _explain(cluster: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> dict:
    found = karpy_cli_json(cluster, monkeypatch, capsys, "explain", "pod", "--all-pending")
    return {p["pod"]: p for p in found["pods"]}


def _apply_pod_edit(manifest: dict[str, Any], edit: dict[str, Any]) -> dict[str, Any]:
    """The manifest with the pod edit `karpy explain` reported (docs/explain.md lists the ops)."""
    spec = manifest["spec"]
    op = edit["op"]
    if op == "dropRequirement":
        spec["nodeSelector"] = {k: v for k, v in spec.get("nodeSelector", {}).items() if k != edit["key"]}
        terms = (
            ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
                "requiredDuringSchedulingIgnoredDuringExecution"
            )
            or {}
        ).get("nodeSelectorTerms") or []
        for term in terms:
            term["matchExpressions"] = [
                e for e in term.get("matchExpressions", []) if e["key"] != edit["key"]
            ]
    elif op == "addToleration":
        spec.setdefault("tolerations", []).append(edit["toleration"])
    elif op == "dropRequests":
        for container in spec["containers"]:
            for part in ("requests", "limits"):
                amounts = container["resources"].get(part) or {}
                for name in edit["resources"]:
                    amounts.pop(name, None)
    elif op == "dropAntiAffinity":
        del spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            edit["index"]
        ]
    else:
        raise AssertionError(f"not a pod edit: {edit}")
    return manifest


def _apply_pool_edit(kube: Any, target: str, edit: dict[str, Any]) -> None:
    from kubernetes import client

    kind, name = target.split(" ", 1)
    objects = client.CustomObjectsApi(kube)
    if kind == "Provisioner":
        if edit["op"] == "setLimit":
            patch: dict[str, Any] = {"spec": {"limits": {"resources": {edit["resource"]: edit["value"]}}}}
        else:
            patch = {"spec": {"requirements": edit["requirements"]}}
        objects.patch_cluster_custom_object("karpenter.sh", "v1alpha5", "provisioners", name, patch)
        return
    if edit["op"] == "setLimit":
        patch = {"spec": {"limits": {edit["resource"]: edit["value"]}}}
    else:
        patch = {"spec": {"template": {"spec": {"requirements": edit["requirements"]}}}}
    objects.patch_cluster_custom_object("karpenter.sh", "v1", "nodepools", name, patch)


def test_explain_names_each_pools_first_rule_and_its_change_admits_the_pod(
    karpy: Karpy,
    cluster: Any,
    core_v1: Any,
    namespace: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    tag = unique("x")
    arm, gpu, small, mv = (unique(n) for n in ("arm", "gpu", "small", "mv"))
    labels = {TAG: tag}
    arch = {"key": wk.ARCH, "operator": "In", "values": ["arm64"]}
    provisioner(
        karpy.kube,
        arm,
        [arch, {"key": wk.ZONE, "operator": "In", "values": ["us-west-2a"]}],
        labels=labels,
    )
    provisioner(
        karpy.kube,
        gpu,
        [],
        labels=labels,
        taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}],
    )
    provisioner(
        karpy.kube,
        small,
        [{"key": wk.INSTANCE_TYPE, "operator": "In", "values": ["m5.large", "m5.xlarge"]}],
        labels=labels,
        limits={"resources": {"cpu": "1"}},
        taints=[{"key": "team", "value": "small", "effect": "NoSchedule"}],
    )
    nodepool(
        karpy.kube,
        mv,
        cluster.state.get("cluster_name", cluster.aws.cluster_name),
        [
            {"key": wk.INSTANCE_TYPE, "operator": "In", "values": ["m5.large", "m5.xlarge", "c5.large"]},
            {"key": wk.INSTANCE_FAMILY, "operator": "Exists", "minValues": 3},
            {"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
        ],
        labels=labels,
        taints=[{"key": "team", "value": "mv", "effect": "NoSchedule"}],
    )
    # A pod in us-west-2a the anti-affinity pod must keep away from (its zone is all `arm` offers).
    db = _pod(
        f"db-{tag}",
        cpu="500m",
        labels={"app": f"db-{tag}"},
        nodeSelector={TAG: tag, wk.PROVISIONER_NAME: arm},
    )
    create_pods(core_v1, namespace, [db])
    wait_for(
        lambda: core_v1.read_namespaced_pod(db["metadata"]["name"], namespace).spec.node_name,
        BIND_SECONDS,
        "db bound",
    )

    tolerate = {"small": [{"key": "team", "value": "small", "effect": "NoSchedule"}]}
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": wk.ZONE, "labelSelector": {"matchLabels": {"app": f"db-{tag}"}}}
            ]
        }
    }
    foo = _pod(
        "unknown",
        cpu="500m",
        guaranteed={"example.com/foo": "1"},
        nodeSelector={TAG: tag, wk.PROVISIONER_NAME: gpu},
        tolerations=[{"key": "dedicated", "operator": "Exists"}],
    )
    pods = {
        "arch": _pod("arch", cpu="500m", nodeSelector={TAG: tag, wk.ARCH: "amd64"}),
        "zone": _pod("zone", cpu="500m", nodeSelector={TAG: tag, wk.ZONE: "us-west-2b"}),
        "taint": _pod("taint", cpu="500m", nodeSelector={TAG: tag, wk.PROVISIONER_NAME: gpu}),
        "limit": _pod(
            "limit",
            cpu="500m",
            nodeSelector={TAG: tag, wk.PROVISIONER_NAME: small},
            tolerations=tolerate["small"],
        ),
        "toobig": _pod(
            "toobig", cpu="8", nodeSelector={TAG: tag, wk.ARCH: "amd64"}, tolerations=tolerate["small"]
        ),
        "unknown": foo,
        "minvalues": _pod(
            "minvalues",
            cpu="500m",
            nodeSelector={TAG: tag, wk.NODEPOOL: mv},
            tolerations=[{"key": "team", "operator": "Exists"}],
        ),
        "anti": _pod(
            "anti",
            cpu="500m",
            labels={"app": f"db-{tag}"},
            nodeSelector={TAG: tag, wk.PROVISIONER_NAME: arm},
            affinity=anti,
        ),
    }
    create_pods(core_v1, namespace, list(pods.values()))

    # Each pod's most relevant pool, its first rule there, and words the user reads.
    expected = {
        "arch": (arm, "requirement", "the pod requires kubernetes.io/arch=amd64; Provisioner "),
        "zone": (arm, "requirement", "the pod requires topology.kubernetes.io/zone=us-west-2b; Provisioner "),
        "taint": (gpu, "taint", "taint dedicated=gpu:NoSchedule of Provisioner "),
        "limit": (small, "limit", f"Provisioner {small} is at its cpu limit: 0 of 1 used, the pod needs 2 ("),
        "toobig": (small, "too_big", "requests 8 CPU; the largest type Provisioner "),
        "unknown": (
            gpu,
            "unknown_resource",
            "the pod requests example.com/foo; no instance type Provisioner ",
        ),
        "minvalues": (mv, "min_values", f"NodePool {mv} needs 3 values of karpenter.k8s.aws/instance-family"),
        "anti": (arm, "anti_affinity", "pod anti-affinity"),
    }

    def explained() -> dict:
        found = _explain(cluster, monkeypatch, capsys)
        return found if all(f"{namespace}/{n}" in found for n in pods) else {}

    found = wait_for(explained, 30, "the pods pending")
    for name, (pool, rule, words) in expected.items():
        answer = found[f"{namespace}/{name}"]
        assert not answer["admitted"], (name, answer)
        by_pool = {p["name"]: p for p in answer["pools"]}
        assert by_pool[pool]["rule"] == rule, (name, by_pool[pool])
        assert words in by_pool[pool]["message"], (name, by_pool[pool]["message"])
        assert answer["reason"] == rule, (name, answer["reason"])
        assert answer["change"] is not None, (name, answer)
    # Pools a pod names by label refuse it by that; others by their taint or requirement.
    taint_pod = {p["name"]: p["rule"] for p in found[f"{namespace}/taint"]["pools"]}
    assert taint_pod[arm] == taint_pod[small] == taint_pod[mv] == "selector"
    arch_pod = {p["name"]: p["rule"] for p in found[f"{namespace}/arch"]["pools"]}
    assert (arch_pod[gpu], arch_pod[small], arch_pod[mv]) == ("taint", "taint", "taint")

    # One FailedProvisioning Event per pod, its count rising as the parked pod is retried.
    def counted() -> Any:
        events = [
            e
            for e in core_v1.list_namespaced_event(
                namespace, field_selector="involvedObject.name=taint"
            ).items
            if e.reason == "FailedProvisioning"
        ]
        assert len(events) <= 1, [(e.metadata.name, e.count) for e in events]
        return events[0] if events and (events[0].count or 0) >= 3 else None

    event = wait_for(counted, 60, "the taint pod's FailedProvisioning counted 3 times")
    assert event.message.startswith("no Provisioner or NodePool can launch a node for the pod: ")
    assert f"Provisioner {gpu}: taint dedicated=gpu:NoSchedule" in event.message

    # Apply each change; the pod (recreated under a new name) is bound.
    fixed = []
    for name, manifest in pods.items():
        change = found[f"{namespace}/{name}"]["change"]
        again = copy.deepcopy(manifest)
        again["metadata"]["name"] = f"{name}-fixed"
        if change["target"] == "pod":
            again = _apply_pod_edit(again, change["edit"])
        else:
            _apply_pool_edit(karpy.kube, change["target"], change["edit"])
        fixed.append(again["metadata"]["name"])
        core_v1.delete_namespaced_pod(name, namespace)
        create_pods(core_v1, namespace, [again])

    def bound() -> list[str]:
        nodes = {n: core_v1.read_namespaced_pod(n, namespace).spec.node_name for n in fixed}
        return [] if not all(nodes.values()) else list(nodes)

    try:
        wait_for(bound, BIND_SECONDS, "every changed pod bound")
    except AssertionError:
        left = [n for n in fixed if not core_v1.read_namespaced_pod(n, namespace).spec.node_name]
        changes = {
            n: found[f"{namespace}/{n}"]["change"]["description"] for n in pods if f"{n}-fixed" in left
        }
        raise AssertionError(f"not bound after their change: {changes}") from None
