"""What every family's user data is rendered from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from extender.api.kubelet import KubeletConfiguration
from extender.api.provisioner import Taint

#: Label domains kubelet refuses in --node-labels (NodeRestriction); karpy sets them on the Node
#: object it creates instead (Karpenter's RejectForbiddenLabels).
KUBELET_FORBIDDEN_DOMAINS = ("kubernetes.io", "k8s.io")


@dataclass(frozen=True)
class NodeBootstrap:
    cluster_name: str
    endpoint: str
    #: Base64 PEM of the cluster CA, as EKS DescribeCluster returns it.
    ca_bundle: str = ""
    #: The cluster's service CIDR (nodeadm requires it).
    cluster_cidr: str = ""
    kubelet: KubeletConfiguration = field(default_factory=KubeletConfiguration)
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    #: The node configuration's own user data, merged per family.
    user_data: str | None = None
    #: `instanceStorePolicy: RAID0`: stripe the instance-store NVMe disks and put nodefs on them.
    instance_store_raid0: bool = False

    def kubelet_labels(self) -> dict[str, str]:
        """The labels kubelet may register with, sorted by key so equal inputs render equally."""

        def allowed(key: str) -> bool:
            domain = key.rpartition("/")[0]
            return not any(domain == d or domain.endswith("." + d) for d in KUBELET_FORBIDDEN_DOMAINS)

        return {k: v for k, v in sorted(self.labels.items()) if allowed(k)}

    def sorted_taints(self) -> list[Taint]:
        return sorted(self.taints, key=lambda t: (t.key, t.value, t.effect))
