"""The catalog lists every resource NodeResourcesFit compares, and the solver plans by all of them.

Sources: kube-scheduler `noderesources/fit.go` (every requested resource, extended ones included,
must fit the node's allocatable; a resource the node does not list has allocatable 0); Karpenter AWS
`pkg/providers/instancetype/types.go` (computeCapacity, ephemeralStorage, kubeReservedResources,
evictionThreshold) and `amifamily/resolver.go` (`DefaultEBS` 20Gi).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from extender.api.resources import (
    EFA,
    EPHEMERAL_STORAGE,
    HABANA_GAUDI,
    NEURON,
    NEURON_CORE,
    NVIDIA_GPU,
    Resources,
)
from extender.scheduling.candidates import ProvisionerView
from extender.scheduling.catalog import build_catalog
from extender.scheduling.instancetypes import GIB, InstanceType
from extender.scheduling.pricing import PriceBook
from extender.scheduling.solver import Plan, solve
from tests import builders
from tests.unit.scheduling.builders import ZONES, catalog, make_provisioner, raw_types


def by_name(types: list[InstanceType] | tuple[InstanceType, ...]) -> dict[str, InstanceType]:
    return {t.name: t for t in types}


def raw(name: str, *, copy_of: str = "m5.large", **changes: Any) -> dict[str, Any]:
    """A DescribeInstanceTypes item: a fixture item renamed, with top-level/NetworkInfo changes."""
    item = copy.deepcopy(next(t for t in raw_types() if t["InstanceType"] == copy_of))
    item["InstanceType"] = name
    network = changes.pop("NetworkInfo", {})
    item.update(changes)
    item["NetworkInfo"].update(network)
    return item


def small_catalog(*items: dict[str, Any]) -> list[InstanceType]:
    return build_catalog(items, offerings=None, zones=ZONES, prices=PriceBook())


def placed_on(plan: Plan, key: str) -> tuple[InstanceType, ...]:
    return next(node.options for node in plan.nodes for p in node.pods if p.key == key)


def reason_of(plan: Plan, key: str) -> str:
    return next(u.reason for u in plan.unschedulable if u.pod.key == key)


#: 72 vCPU / 192 GiB / 15 ENIs with one EFA interface: big, and no accelerator.
C5N_18XL = {
    "VCpuInfo": {"DefaultVCpus": 72},
    "MemoryInfo": {"SizeInMiB": 196608},
    "NetworkInfo": {
        "MaximumNetworkInterfaces": 15,
        "Ipv4AddressesPerInterface": 50,
        "EfaSupported": True,
        "EfaInfo": {"MaximumEfaInterfaces": 1},
    },
}


# --- catalog ------------------------------------------------------------------------------------


def test_every_type_has_the_default_root_volume_as_ephemeral_storage():
    """Karpenter AWS ephemeralStorage(): no blockDeviceMappings -> DefaultEBS 20Gi; kubeReservedResources:
    ephemeral-storage 1Gi; evictionThreshold: nodefs.available 10% of capacity -> 17Gi allocatable.
    Instance store (g4dn's NVMe) counts only under instanceStorePolicy RAID0, which karpy never sets."""
    types = by_name(catalog())
    for instance_type in types.values():
        assert instance_type.capacity.get(EPHEMERAL_STORAGE) == 20 * GIB
        assert instance_type.overhead.get(EPHEMERAL_STORAGE) == 1 * GIB + 2 * GIB
        assert instance_type.allocatable.get(EPHEMERAL_STORAGE) == 17 * GIB
    assert next(t for t in raw_types() if t["InstanceType"] == "g4dn.xlarge")["InstanceStorageInfo"]
    assert types["g4dn.xlarge"].capacity.get(EPHEMERAL_STORAGE) == 20 * GIB


def test_efa_neuron_cores_and_gaudi_come_from_describe_instance_types():
    """Karpenter AWS computeCapacity(): efas() = EfaInfo.MaximumEfaInterfaces; awsNeuronDevices() and
    awsNeuronCores() = devices x CoreInfo.Count from NeuronInfo; habanaGaudis() = GpuInfo by manufacturer."""
    types = by_name(catalog())
    assert types["g4dn.12xlarge"].capacity.get(EFA) == 1
    assert types["p4d.24xlarge"].capacity.get(EFA) == 4
    assert types["m5.large"].capacity.get(EFA) == 0 and types["g4dn.xlarge"].capacity.get(EFA) == 0
    assert types["inf1.xlarge"].capacity.get(NEURON) == 1
    assert types["inf1.xlarge"].capacity.get(NEURON_CORE) == 4
    gaudi = {"Gpus": [{"Name": "Gaudi HL-205", "Manufacturer": "Habana", "Count": 8}]}
    no_efa = {"EfaSupported": False, "EfaInfo": {"MaximumEfaInterfaces": 1}}
    made = by_name(small_catalog(raw("dl1.24xlarge", GpuInfo=gaudi), raw("x.large", NetworkInfo=no_efa)))
    assert made["dl1.24xlarge"].capacity.get(HABANA_GAUDI) == 8
    assert made["dl1.24xlarge"].capacity.get(NVIDIA_GPU) == 0
    assert made["x.large"].capacity.get(EFA) == 0


def test_kubelet_max_pods_override_keeps_storage_and_extended_resources():
    p4d = by_name(catalog())["p4d.24xlarge"].with_max_pods(110)
    assert p4d.capacity.get(EFA) == 4 and p4d.capacity.get(NVIDIA_GPU) == 8
    assert p4d.allocatable.get(EPHEMERAL_STORAGE) == 17 * GIB


# --- ephemeral-storage --------------------------------------------------------------------------


def test_ephemeral_storage_pod_lands_on_a_type_with_enough_allocatable():
    """kube-scheduler NodeResourcesFit compares ephemeral-storage like cpu: request <= allocatable."""
    plan = solve(
        [builders.pod("a", uid="", cpu="100m", guaranteed={"ephemeral-storage": "10Gi"})],
        [make_provisioner()],
        catalog(),
    )
    assert not plan.unschedulable
    options = placed_on(plan, "default/a")
    assert all(o.allocatable.get(EPHEMERAL_STORAGE) >= 10 * GIB for o in options)


def test_allocatable_ephemeral_storage_is_the_limit_exactly():
    """17Gi = 20Gi root - 1Gi kube-reserved - 2Gi nodefs.available eviction: fits; one MiB more does not."""
    plan = solve(
        [
            builders.pod("fits", uid="", cpu="100m", guaranteed={"ephemeral-storage": "17Gi"}),
            builders.pod("over", uid="", cpu="100m", guaranteed={"ephemeral-storage": f"{17 * 1024 + 1}Mi"}),
        ],
        [make_provisioner()],
        catalog(),
    )
    assert [p.key for n in plan.nodes for p in n.pods] == ["default/fits"]
    assert EPHEMERAL_STORAGE in reason_of(plan, "default/over")


def test_30gi_ephemeral_pod_is_unschedulable_with_the_20gi_default_root_volume():
    """Karpenter: DefaultEBS 20Gi root volume; kube-scheduler: 30Gi > 17Gi allocatable on every type."""
    plan = solve(
        [builders.pod("big", uid="", cpu="100m", guaranteed={"ephemeral-storage": "30Gi"})],
        [make_provisioner()],
        catalog(),
    )
    assert not plan.nodes
    assert EPHEMERAL_STORAGE in reason_of(plan, "default/big")


def test_ephemeral_storage_limits_how_many_pods_share_a_node():
    """Three 5Gi pods fit in 17Gi, a fourth does not, however much cpu/memory the node has left."""
    pods = [
        builders.pod(f"p{i}", uid="", cpu="100m", guaranteed={"ephemeral-storage": "5Gi"}) for i in range(7)
    ]
    plan = solve(pods, [make_provisioner()], catalog())
    assert not plan.unschedulable
    assert sum(len(n.pods) for n in plan.nodes) == 7
    assert all(len(n.pods) <= 3 for n in plan.nodes) and len(plan.nodes) == 3


def test_daemonset_ephemeral_storage_is_reserved_on_every_node():
    """kube-scheduler counts the DaemonSet pod's request on the node: 17Gi - 1Gi leaves 16Gi."""
    daemon = builders.pod("ds", uid="", cpu="100m", guaranteed={"ephemeral-storage": "1Gi"})
    ok = solve(
        [builders.pod("a", uid="", cpu="100m", guaranteed={"ephemeral-storage": "16Gi"})],
        [make_provisioner()],
        catalog(),
        daemonsets=[daemon],
    )
    assert not ok.unschedulable and ok.nodes
    over = solve(
        [builders.pod("b", uid="", cpu="100m", guaranteed={"ephemeral-storage": "16500Mi"})],
        [make_provisioner()],
        catalog(),
        daemonsets=[daemon],
    )
    assert not over.nodes and EPHEMERAL_STORAGE in reason_of(over, "default/b")


# --- extended resources -------------------------------------------------------------------------


def test_efa_pod_lands_on_an_efa_type_and_efa_does_not_reserve_the_type():
    """kube-scheduler: vpc.amazonaws.com/efa is an extended resource, allocatable 0 where unlisted.
    Karpenter 0.5's accelerator rule covers GPUs/Neuron only: an EFA type still serves plain pods."""
    types = small_catalog(
        raw("m5.large"), raw("c5n.large", copy_of="c5.large"), raw("c5n.18xlarge", **C5N_18XL)
    )
    plan = solve(
        [
            builders.pod("efa", uid="", cpu="1", guaranteed={"vpc.amazonaws.com/efa": "1"}),
            builders.pod("big", uid="", cpu="60"),
        ],
        [make_provisioner()],
        types,
    )
    assert not plan.unschedulable
    assert [o.name for o in placed_on(plan, "default/efa")] == ["c5n.18xlarge"]
    assert [o.name for o in placed_on(plan, "default/big")] == ["c5n.18xlarge"]


def test_efa_gpu_pod_lands_on_a_gpu_type_with_efa():
    """A pod asking for a GPU and an EFA interface needs both on the node (NodeResourcesFit)."""
    plan = solve(
        [
            builders.pod(
                "train", uid="", cpu="4", guaranteed={"nvidia.com/gpu": "1", "vpc.amazonaws.com/efa": "1"}
            )
        ],
        [make_provisioner()],
        catalog(),
    )
    assert not plan.unschedulable
    options = placed_on(plan, "default/train")
    assert {o.name for o in options} <= {"g4dn.12xlarge", "p3dn.24xlarge", "p4d.24xlarge"}
    assert all(o.capacity.get(EFA) >= 1 and o.capacity.get(NVIDIA_GPU) >= 1 for o in options)


def test_neuroncore_pod_lands_on_inferentia_and_plain_pods_never_do():
    """Neuron device plugin registers aws.amazon.com/neuroncore; Karpenter 0.5 packable.go: an
    accelerator type only serves pods requesting an accelerator."""
    plan = solve(
        [
            builders.pod("infer", uid="", cpu="1", guaranteed={"aws.amazon.com/neuroncore": "2"}),
            builders.pod("plain", uid="", cpu="1"),
        ],
        [make_provisioner()],
        catalog(),
    )
    assert not plan.unschedulable
    assert [o.name for o in placed_on(plan, "default/infer")] == ["inf1.xlarge"]
    assert all(not o.gpus for o in placed_on(plan, "default/plain"))


def test_gaudi_type_only_serves_gaudi_pods():
    gaudi = {"Gpus": [{"Name": "Gaudi HL-205", "Manufacturer": "Habana", "Count": 8}]}
    types = small_catalog(raw("m5.large"), raw("dl1.24xlarge", copy_of="p4d.24xlarge", GpuInfo=gaudi))
    plan = solve(
        [
            builders.pod("hpu", uid="", cpu="1", guaranteed={"habana.ai/gaudi": "1"}),
            builders.pod("plain", uid="", cpu="1"),
        ],
        [make_provisioner()],
        types,
    )
    assert [o.name for o in placed_on(plan, "default/hpu")] == ["dl1.24xlarge"]
    assert [o.name for o in placed_on(plan, "default/plain")] == ["m5.large"]


@pytest.mark.parametrize(
    ("resource", "amount"),
    [("example.com/foo", "1"), ("hugepages-2Mi", "20Mi"), ("vpc.amazonaws.com/efa", "1")],
)
def test_a_resource_no_type_lists_makes_the_pod_unschedulable_with_its_name(resource: str, amount: str):
    """kube-scheduler NodeResourcesFit: a resource the node does not list has allocatable 0, so the
    pod fits nowhere (the fixture has no EFA type without a GPU); the reason names the resource."""
    plan = solve(
        [builders.pod("x", uid="", cpu="100m", guaranteed={"memory": "1Gi", resource: amount})],
        [make_provisioner()],
        catalog(),
    )
    assert not plan.nodes
    assert resource in reason_of(plan, "default/x")


def test_unlisted_names_resources_no_usable_type_of_the_provisioner_has():
    """What a clear unschedulable reason names: kube-scheduler NodeResourcesFit's allocatable-0
    resources, over the types the accelerator rule lets serve the pod."""
    view = ProvisionerView.build(make_provisioner(), catalog(), (), ("cpu", "memory", "pods"))
    requests = Resources.parse(
        {
            "cpu": "1",
            "ephemeral-storage": "1Gi",
            "example.com/foo": "1",
            "hugepages-2Mi": "2Mi",
            NVIDIA_GPU: 1,
        }
    )
    assert view.unlisted(requests) == ("example.com/foo", "hugepages-2Mi")
    # The fixture's EFA types all have GPUs, which a pod without a GPU request may not use.
    assert view.unlisted(Resources.parse({"cpu": "1", EFA: 1})) == (EFA,)
    assert view.unlisted(Resources.parse({"cpu": "1", EFA: 1, NVIDIA_GPU: 1})) == ()
    no_gpus = ProvisionerView.build(make_provisioner(), small_catalog(raw("m5.large")), (), ())
    assert no_gpus.unlisted(Resources.parse({"cpu": "1", NVIDIA_GPU: 1})) == (NVIDIA_GPU,)
    assert ProvisionerView.build(make_provisioner(), [], (), ()).unlisted(requests) == ()
