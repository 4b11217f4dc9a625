"""Pods per node as the VPC CNI sets them (extender/scheduling/poddensity.py), on the fixture's
DescribeInstanceTypes items.

Sources: Karpenter AWS v1.14.1 `pkg/providers/instancetype/types.go` ENILimitedPods (default card's
ENIs only, minus RESERVED_ENIS, 0 when none is left) and `pkg/operator/options/options.go`
ReservedENIs; the EKS AMI's `templates/al2/runtime/max-pods-calculator.sh` for prefix delegation
(Nitro only, 16 addresses per prefix, 110 up to 30 vCPUs and 250 above).
"""

from __future__ import annotations

from typing import Any

import pytest

from extender.api.kubelet import KubeletConfiguration
from extender.api.nodeclass import NodeClass
from extender.api.resources import PODS
from extender.scheduling.catalog import build_catalog
from extender.scheduling.instancetypes import NodeSettings
from extender.scheduling.poddensity import PodDensity, pods_for
from extender.scheduling.pricing import PriceBook
from tests.unit.scheduling.builders import ZONES, raw_types


def item(name: str) -> dict[str, Any]:
    return next(i for i in raw_types() if i["InstanceType"] == name)


def pods(name: str, **density: Any) -> int:
    (found,) = (
        t
        for t in build_catalog(
            [item(name)], offerings=None, zones=ZONES, prices=PriceBook(), density=PodDensity(**density)
        )
    )
    assert found.capacity.get(PODS) == found.max_pods
    return found.max_pods


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("m5.large", 29),  # 3 x (10 - 1) + 2, Karpenter's worked example
        ("t3.micro", 4),
        ("c5.18xlarge", 737),
        # 4 network cards x 15 ENIs: the VPC CNI uses the default card only (15 x 49 + 2), not 60 ENIs.
        ("p4d.24xlarge", 737),
    ],
)
def test_eni_limited_pods_count_the_default_network_cards_enis(name: str, expected: int) -> None:
    assert pods(name) == expected


def test_reserved_enis_leave_the_pods_of_those_enis_out() -> None:
    assert pods("m5.large", reserved_enis=1) == 2 * 9 + 2
    assert pods("p4d.24xlarge", reserved_enis=2) == 13 * 49 + 2
    # No ENI left for pods: no pods at all (Karpenter returns 0, not the 2 host-network pods).
    assert pods("t3.micro", reserved_enis=2) == 0
    assert pods_for(item("t3.micro"), PodDensity(reserved_enis=5)).max_pods == 0


def test_reserved_enis_lower_kube_reserved_memory_with_the_pods() -> None:
    """Karpenter: "Reserved ENIs are not included in the calculations for max-pods or kube-reserved"."""
    mib = 2**20
    (plain,) = build_catalog([item("m5.large")], offerings=None, zones=ZONES, prices=PriceBook())
    (reserved,) = build_catalog(
        [item("m5.large")],
        offerings=None,
        zones=ZONES,
        prices=PriceBook(),
        density=PodDensity(reserved_enis=1),
    )
    assert plain.overhead.memory - reserved.overhead.memory == pytest.approx(11 * (29 - 20) * mib)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("m5.large", 110),  # 3 x (9 x 16) + 2 = 434, capped at 110 (2 vCPUs)
        ("t3.micro", 2 * (1 * 16) + 2),  # 34, under the cap
        ("m5.8xlarge", 250),  # 8 x (29 x 16) + 2 = 3714, capped at 250 (32 vCPUs > 30)
        ("m5.4xlarge", 110),  # 16 vCPUs
    ],
)
def test_prefix_delegation_on_nitro_types(name: str, expected: int) -> None:
    assert pods(name, prefix_delegation=True) == expected


def test_prefix_delegation_needs_a_nitro_type() -> None:
    # m5.metal reports no hypervisor: the CNI falls back to secondary IPs, the ENI-limited count.
    metal = pods_for(item("m5.metal"), PodDensity(prefix_delegation=True))
    assert metal.max_pods == metal.eni_limited == 15 * 49 + 2


def test_prefix_delegation_keeps_kube_reserved_on_the_eni_limited_count_and_kubelet_settings_win() -> None:
    (m5,) = build_catalog(
        [item("m5.large")],
        offerings=None,
        zones=ZONES,
        prices=PriceBook(),
        density=PodDensity(prefix_delegation=True),
    )
    assert (m5.max_pods, m5.eni_pods) == (110, 29)
    node_class = NodeClass()
    # Other kubelet settings keep the CNI's count; maxPods and podsPerCore still override it.
    assert (
        m5.for_node(NodeSettings.of(KubeletConfiguration(kube_reserved={"cpu": "1"}), node_class)).max_pods
        == 110
    )
    assert m5.for_node(NodeSettings.of(KubeletConfiguration(max_pods=50), node_class)).max_pods == 50
    assert m5.for_node(NodeSettings.of(KubeletConfiguration(pods_per_core=20), node_class)).max_pods == 40
