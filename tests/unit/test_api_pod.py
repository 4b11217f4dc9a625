"""Pod.from_manifest: requests arithmetic, affinity parsing, errors naming pod and field."""

import pytest

from extender.api.pod import Pod, PodError


def manifest(**spec):
    return {
        "metadata": {"name": "web-0", "namespace": "shop"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}], **spec},
    }


def test_requests_are_sum_of_containers_max_init_plus_overhead():
    pod = Pod.from_manifest(
        manifest(
            containers=[
                {"name": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
                {"name": "b", "resources": {"requests": {"cpu": "500m"}}},
            ],
            initContainers=[{"name": "i", "resources": {"requests": {"cpu": "2"}}}],
            overhead={"memory": "128Mi"},
        )
    )
    assert pod.requests.cpu == 2 and pod.requests.memory == 2**30 + 128 * 2**20
    assert pod.key == "shop/web-0"


def test_gpu_limit_counts_as_request():
    pod = Pod.from_manifest(
        manifest(containers=[{"name": "g", "resources": {"limits": {"nvidia.com/gpu": 1}}}])
    )
    assert pod.requests.get("nvidia.com/gpu") == 1


def test_bad_quantity_names_pod_and_field():
    with pytest.raises(PodError) as err:
        Pod.from_manifest(manifest(containers=[{"name": "c", "resources": {"requests": {"cpu": "1x"}}}]))
    assert "pod shop/web-0 spec.containers[0].resources.requests.cpu" in str(err.value)


def test_unsupported_topology_key_is_rejected():
    spread = [{"maxSkew": 1, "topologyKey": "rack", "labelSelector": {}}]
    with pytest.raises(PodError, match=r"topologySpreadConstraints\[0\]\.topologyKey"):
        Pod.from_manifest(manifest(topologySpreadConstraints=spread))


def test_owner_and_tolerations():
    obj = manifest(tolerations=[{"operator": "Exists"}])
    obj["metadata"]["ownerReferences"] = [{"kind": "DaemonSet", "name": "ds", "controller": True}]
    pod = Pod.from_manifest(obj)
    assert pod.is_daemonset and pod.tolerations[0].operator == "Exists"
