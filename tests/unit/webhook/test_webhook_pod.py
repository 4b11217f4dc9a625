"""Pod defaulting: which pods get `karpenter.sh/provisioner-name`, and which Provisioner is chosen."""

from __future__ import annotations

import json
from typing import Any

import pytest

from extender.api.provisioner import Provisioner
from tests.unit.webhook.reviews import loaded, pod_manifest, pod_review
from webhook.admission import Verdict, parse_review
from webhook.config import WebhookConfig
from webhook.pod import mutate

CONFIG = WebhookConfig(namespace="karpy", read_provisioners=False)
ARCH = "kubernetes.io/arch"


def run(
    pod: dict[str, Any],
    known: list[Provisioner] | None,
    *,
    namespace: str = "apps",
    operation: str = "CREATE",
) -> Verdict:
    request = parse_review(json.dumps(pod_review(pod, namespace=namespace, operation=operation)).encode())
    return mutate(request, CONFIG, lambda: known)


def chosen(verdict: Verdict) -> str | None:
    if not verdict.patch:
        return None
    (op,) = verdict.patch
    value = op["value"]
    return value if isinstance(value, str) else value["karpenter.sh/provisioner-name"]


FLEET = [
    loaded("general", requirements=[{"key": ARCH, "operator": "In", "values": ["amd64"]}], weight=10),
    loaded("graviton", requirements=[{"key": ARCH, "operator": "In", "values": ["arm64"]}], weight=5),
    loaded("gpu", taints=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"}], weight=50),
]


def test_no_provisioner_existing_means_default_added_as_whole_node_selector() -> None:
    verdict = run(pod_manifest(), [])
    assert verdict.patch == [
        {"op": "add", "path": "/spec/nodeSelector", "value": {"karpenter.sh/provisioner-name": "default"}}
    ]


def test_failed_provisioner_list_admits_unchanged_with_warning_never_pins_default() -> None:
    """Found 7: a failed list (None) used to pin the pod to `default` for good (nodeSelector is
    immutable); this failed before issue 13, which admits the pod unchanged instead."""
    verdict = run(pod_manifest(), None)
    assert verdict.allowed and not verdict.patch
    assert verdict.warnings and "could not be listed" in verdict.warnings[0]


@pytest.mark.parametrize("kind", [["DaemonSet"], {"k": "DaemonSet"}, 7, None])
def test_non_string_owner_kind_is_not_an_error(kind: Any) -> None:
    """Found 8: a list or object `ownerReferences[].kind` raised TypeError (unhashable) before issue 13."""
    manifest = pod_manifest()
    manifest["metadata"]["ownerReferences"] = [{"kind": kind, "name": "x", "apiVersion": "v1", "uid": "u"}]
    assert run(manifest, FLEET).allowed


def test_highest_weight_fitting_provisioner_wins() -> None:
    # gpu (50) has a taint the pod does not tolerate; general (10) beats graviton (5).
    assert chosen(run(pod_manifest(), FLEET)) == "general"
    arm = run(pod_manifest(nodeSelector={ARCH: "arm64"}), FLEET)
    assert arm.patch == [
        {"op": "add", "path": "/spec/nodeSelector/karpenter.sh~1provisioner-name", "value": "graviton"}
    ]
    tolerant = pod_manifest(tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}])
    assert chosen(run(tolerant, FLEET)) == "gpu"


def test_no_fitting_provisioner_admits_unchanged_with_warning() -> None:
    verdict = run(pod_manifest(nodeSelector={ARCH: "s390x"}), FLEET)
    assert verdict.allowed and not verdict.patch
    assert verdict.warnings == ("karpy: no provisioner fits this pod (tried 3)",)


def test_generate_named_pod_without_namespace_in_metadata() -> None:
    pod = pod_manifest()
    pod["metadata"] = {"generateName": "web-7d9f-"}
    assert chosen(run(pod, FLEET)) == "general"


SKIPPED = {
    "node-selector": pod_manifest(nodeSelector={"karpenter.sh/provisioner-name": "mine"}),
    "required-affinity": pod_manifest(
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "karpenter.sh/provisioner-name", "operator": "In", "values": ["mine"]}
                            ]
                        }
                    ]
                }
            }
        }
    ),
    "preferred-affinity": pod_manifest(
        affinity={
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 1,
                        "preference": {
                            "matchExpressions": [
                                {"key": "karpenter.sh/provisioner-name", "operator": "In", "values": ["mine"]}
                            ]
                        },
                    }
                ]
            }
        }
    ),
    "bound": pod_manifest(nodeName="node-1"),
}


@pytest.mark.parametrize("name", sorted(SKIPPED))
def test_pods_that_choose_or_are_bound_are_untouched(name: str) -> None:
    assert run(SKIPPED[name], FLEET) == Verdict()


def test_daemonset_static_and_mirror_pods_are_untouched() -> None:
    for kind in ("DaemonSet", "Node"):
        pod = pod_manifest()
        pod["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": kind, "name": "x", "uid": "1"}]
        assert run(pod, FLEET) == Verdict()
    mirror = pod_manifest()
    mirror["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "abc"}
    assert run(mirror, FLEET) == Verdict()


def test_excluded_namespaces_and_non_create_are_untouched() -> None:
    assert run(pod_manifest(), FLEET, namespace="kube-system") == Verdict()
    assert run(pod_manifest(), FLEET, namespace="karpy") == Verdict()
    assert run(pod_manifest(), FLEET, operation="UPDATE") == Verdict()


def test_unparseable_pod_is_admitted_with_warning_never_denied() -> None:
    pod = pod_manifest()
    pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "lots"}}
    verdict = run(pod, FLEET)
    assert verdict.allowed and not verdict.patch
    assert verdict.warnings and verdict.warnings[0].startswith("karpy: no provisioner selected:")


def test_object_that_is_not_a_pod_is_denied_400() -> None:
    assert run({"kind": "Pod", "spec": "x"}, FLEET) == Verdict.deny(400, "request.object is not a Pod")


def test_a_nodepool_is_selected_by_its_own_key_and_a_pod_naming_one_is_left_alone() -> None:
    from extender.api.nodepool import load_nodepool

    ref = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
    pool = load_nodepool(
        {
            "metadata": {"name": "v1pool"},
            "spec": {"weight": 100, "template": {"spec": {"requirements": [], "nodeClassRef": ref}}},
        }
    )
    verdict = run(pod_manifest(), [*FLEET, pool])
    assert verdict.patch == [
        {"op": "add", "path": "/spec/nodeSelector", "value": {"karpenter.sh/nodepool": "v1pool"}}
    ]
    selecting = pod_manifest()
    selecting["spec"]["nodeSelector"] = {"karpenter.sh/nodepool": "v1pool"}
    assert not run(selecting, [*FLEET, pool]).patch
