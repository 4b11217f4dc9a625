"""A NodePool's `minValues` reaches CreateFleet on the local control plane + moto: the pods' node is
launched with instance-type overrides spanning at least that many instance families (Karpenter's
Strict minValues: pkg/cloudprovider/types.go SatisfiesMinValues, applied to the launch's options).

- Karpenter's published example (tests/data/karpenter-examples/v1/min-values-family.yaml: spot,
  c/m/r, `instance-family Exists minValues: 5`), its requirements unchanged, stored as a real
  `karpenter.sh/v1` NodePool;
- the same NodePool without minValues, then with a minValues on instance-cpu above the vCPU counts
  its launch offered: the cheapest options alone fall short, so the launch must carry a covering set
  (karpy's choice where Karpenter fails the launch), still led by the cheapest type."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from extender.api import labels as wk
from tests.integration.helpers import Karpy, all_bound, create_pods, nodepool, pod_manifest, unique, wait_for

pytestmark = pytest.mark.integration

EXAMPLE = (
    Path(__file__).resolve().parents[1] / "data" / "karpenter-examples" / "v1" / "min-values-family.yaml"
)
FAMILY = "karpenter.k8s.aws/instance-family"
CPU = "karpenter.k8s.aws/instance-cpu"


def example_requirements() -> list[dict[str, Any]]:
    pool = next(d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d and d["kind"] == "NodePool")
    return copy.deepcopy(pool["spec"]["template"]["spec"]["requirements"])


@pytest.fixture
def cluster_name(cluster: Any) -> str:
    return str(cluster.state.get("cluster_name", cluster.aws.cluster_name))  # as conftest's `karpy`


@pytest.fixture
def fleets(karpy: Karpy) -> Iterator[list[dict[str, Any]]]:
    """The parameters of every CreateFleet call karpy makes while the test runs."""
    calls: list[dict[str, Any]] = []

    def record(params: dict[str, Any], **_: Any) -> None:
        calls.append(params)

    karpy.ec2.meta.events.register("provide-client-params.ec2.CreateFleet", record)
    yield calls
    karpy.ec2.meta.events.unregister("provide-client-params.ec2.CreateFleet", record)


def launched(
    karpy: Karpy,
    core_v1: Any,
    namespace: str,
    fleets: list[dict[str, Any]],
    cluster_name: str,
    requirements: list[dict[str, Any]],
) -> tuple[set[str], str]:
    """The instance types in the overrides of the one launch for one pod on a new NodePool, and the
    type of the node launched."""
    name = unique("minv")
    nodepool(karpy.kube, name, cluster_name, requirements)
    before = len(fleets)
    pod = pod_manifest(f"{name}-pod", "500m", selector={wk.NODEPOOL: name})
    create_pods(core_v1, namespace, [pod])
    (bound,) = wait_for(all_bound(core_v1, namespace, 1), 90, f"the pod of {name} bound")
    core_v1.delete_namespaced_pod(bound.metadata.name, namespace)
    wait_for(lambda: not all_bound(core_v1, namespace, 1)(), 60, "the pod gone")
    (call,) = fleets[before:]
    types = {o["InstanceType"] for c in call["LaunchTemplateConfigs"] for o in c["Overrides"]}
    node = core_v1.read_node(bound.spec.node_name)
    assert node.metadata.labels[wk.NODEPOOL] == name
    chosen = node.metadata.labels[wk.INSTANCE_TYPE]
    assert chosen in types
    return types, chosen


def vcpus(karpy: Karpy, types: set[str]) -> set[int]:
    """The vCPU counts (karpenter.k8s.aws/instance-cpu) moto's catalog gives the types."""
    found = karpy.ec2.describe_instance_types(InstanceTypes=sorted(types))["InstanceTypes"]
    assert len(found) == len(types)
    return {t["VCpuInfo"]["DefaultVCpus"] for t in found}


def test_karpenters_min_values_example_launches_across_five_families(
    karpy: Karpy, core_v1: Any, namespace: str, fleets: list[dict[str, Any]], cluster_name: str
) -> None:
    requirements = example_requirements()
    assert {"key": FAMILY, "operator": "Exists", "minValues": 5} in requirements
    types, chosen = launched(karpy, core_v1, namespace, fleets, cluster_name, requirements)
    families = {t.split(".")[0] for t in types}
    assert len(families) >= 5 and chosen.split(".")[0] in families
    assert all(f[0] in "cmr" for f in families), families


def test_min_values_above_what_the_cheapest_options_offer_widens_the_launch(
    karpy: Karpy, core_v1: Any, namespace: str, fleets: list[dict[str, Any]], cluster_name: str
) -> None:
    """The cheapest options of a small pod are mostly the same few sizes (their 60 types span ~55
    families but few vCPU counts): a minValues on instance-cpu above what they span needs a
    covering set, and the node is still the cheapest option."""
    plain = [r for r in example_requirements() if "minValues" not in r]
    types, cheapest = launched(karpy, core_v1, namespace, fleets, cluster_name, plain)
    offered = vcpus(karpy, types)
    wanted = len(offered) + 3
    widened = [*plain, {"key": CPU, "operator": "Exists", "minValues": wanted}]
    types, chosen = launched(karpy, core_v1, namespace, fleets, cluster_name, widened)
    assert len(vcpus(karpy, types)) >= wanted > len(offered)
    assert chosen == cheapest  # the covering set keeps the cheapest type: the node costs the same
