"""The kubelet settings a Provisioner gives its nodes (`spec.kubeletConfiguration`).

Field names follow Karpenter's v1alpha5 KubeletConfiguration, which v1 moved unchanged onto the
EC2NodeClass (`spec.kubelet`). Quantities and thresholds are kept as the user wrote them, because
they are rendered into user data verbatim; `extender.scheduling.instancetypes` reads the same
values to compute the allocatable packing uses.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

#: Resources kubeReserved/systemReserved may name (kubelet's --kube-reserved keys).
RESERVABLE = ("cpu", "memory", "ephemeral-storage", "pid")
#: Eviction signals kubelet accepts in evictionHard/evictionSoft on Linux.
EVICTION_SIGNALS = (
    "memory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "pid.available",
)


@dataclass(frozen=True)
class KubeletConfiguration:
    cluster_dns: tuple[str, ...] = ()
    max_pods: int | None = None
    pods_per_core: int | None = None
    system_reserved: Mapping[str, str] = field(default_factory=dict)
    kube_reserved: Mapping[str, str] = field(default_factory=dict)
    eviction_hard: Mapping[str, str] = field(default_factory=dict)
    eviction_soft: Mapping[str, str] = field(default_factory=dict)
    #: Go durations ("1m30s") by signal, one per evictionSoft signal.
    eviction_soft_grace_period: Mapping[str, str] = field(default_factory=dict)
    eviction_max_pod_grace_period: int | None = None
    image_gc_high_threshold_percent: int | None = None
    image_gc_low_threshold_percent: int | None = None
    cpu_cfs_quota: bool | None = None

    def config(self) -> dict[str, object]:
        """The set fields under kubelet's own KubeletConfiguration names (nodeadm's `kubelet.config`)."""
        values: dict[str, object] = {
            "clusterDNS": list(self.cluster_dns),
            "maxPods": self.max_pods,
            "podsPerCore": self.pods_per_core,
            "systemReserved": dict(self.system_reserved),
            "kubeReserved": dict(self.kube_reserved),
            "evictionHard": dict(self.eviction_hard),
            "evictionSoft": dict(self.eviction_soft),
            "evictionSoftGracePeriod": dict(self.eviction_soft_grace_period),
            "evictionMaxPodGracePeriod": self.eviction_max_pod_grace_period,
            "imageGCHighThresholdPercent": self.image_gc_high_threshold_percent,
            "imageGCLowThresholdPercent": self.image_gc_low_threshold_percent,
            "cpuCFSQuota": self.cpu_cfs_quota,
        }
        return {k: v for k, v in values.items() if v is not None and v != [] and v != {}}
