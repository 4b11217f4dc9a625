"""How many pods the VPC CNI lets a node of an instance type run: its maxPods.

ENI-limited (Karpenter AWS `instancetype/types.go` ENILimitedPods, the EKS AMIs' eni-max-pods):
`(ENIs of the default network card - reserved ENIs) x (IPv4 per ENI - 1) + 2`. Only the default
card's ENIs count (the VPC CNI uses no other card), so a p4d.24xlarge (4 cards x 15 ENIs, 50 IPv4
each) gets 737, not the 2,942 all 60 ENIs would give. `reserved_enis` is Karpenter's operator
setting RESERVED_ENIS (`--reserved-enis`): ENIs the CNI does not use for pods (custom networking,
a trunk ENI for security groups per pod); they are left out of maxPods and of kube-reserved memory.

Prefix delegation (the VPC CNI's ENABLE_PREFIX_DELEGATION; Karpenter computes none of it and
leaves the user to set maxPods): on Nitro types each IPv4 slot holds a /28 prefix of 16 addresses,
and the EKS AMI's max-pods-calculator.sh recommends
`min(ENIs x ((IPv4 per ENI - 1) x 16) + 2, 110 if vCPU <= 30 else 250)`. Other types keep the
ENI-limited count.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: Addresses in the /28 prefix the VPC CNI assigns per IPv4 slot with prefix delegation.
IPS_PER_PREFIX = 16
#: max-pods-calculator.sh's recommended ceilings: up to 30 vCPUs, and above.
LOW_CPU_CEILING, HIGH_CPU_CEILING, LOW_CPU_LIMIT = 110, 250, 30


@dataclass(frozen=True)
class PodDensity:
    """The cluster's pod networking, as it sets every node's maxPods."""

    #: Karpenter's RESERVED_ENIS: ENIs of the default card the CNI leaves to other uses.
    reserved_enis: int = 0
    #: The VPC CNI assigns /28 prefixes (ENABLE_PREFIX_DELEGATION=true).
    prefix_delegation: bool = False


DEFAULT_DENSITY = PodDensity()


@dataclass(frozen=True)
class Pods:
    #: The pod capacity the CNI gives the type (before any kubelet maxPods/podsPerCore).
    max_pods: int
    #: The ENI-limited count kube-reserved memory is computed for on the EKS AMIs.
    eni_limited: int


def default_card_enis(network: Mapping[str, Any]) -> int:
    """ENIs of the default network card (NetworkInfo.MaximumNetworkInterfaces when no cards are listed)."""
    index = network.get("DefaultNetworkCardIndex", 0)
    for card in network.get("NetworkCards") or ():
        if card.get("NetworkCardIndex", 0) == index and card.get("MaximumNetworkInterfaces") is not None:
            return int(card["MaximumNetworkInterfaces"])
    return int(network["MaximumNetworkInterfaces"])


def pods_for(item: Mapping[str, Any], density: PodDensity = DEFAULT_DENSITY) -> Pods:
    """The pods of one DescribeInstanceTypes item; raises KeyError/TypeError/ValueError when its
    NetworkInfo lacks the figures."""
    network = item["NetworkInfo"]
    enis = max(default_card_enis(network) - density.reserved_enis, 0)
    ips = int(network["Ipv4AddressesPerInterface"])
    # No usable ENI: no pod networking at all (Karpenter returns 0, not the +2 host-network pods).
    eni_limited = enis * (ips - 1) + 2 if enis else 0
    max_pods = eni_limited
    if density.prefix_delegation and enis and item.get("Hypervisor") == "nitro":
        vcpus = int(item["VCpuInfo"]["DefaultVCpus"])
        ceiling = HIGH_CPU_CEILING if vcpus > LOW_CPU_LIMIT else LOW_CPU_CEILING
        max_pods = min(enis * ((ips - 1) * IPS_PER_PREFIX) + 2, ceiling)
    return Pods(max_pods=max_pods, eni_limited=eni_limited)
