"""Node repair policies: which node conditions mean a node is unhealthy, and for how long that is
tolerated before the node is replaced.

The defaults are Karpenter's AWS provider's (`CloudProvider.RepairPolicies`, aws/karpenter-provider-aws
pkg/cloudprovider): the kubelet's Ready condition False or Unknown for 30 minutes, and the EKS node
monitoring agent's conditions False for 30 minutes (10 for accelerated hardware). Data only: the
lifecycle (extender/lifecycle/repair.py) decides with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, slots=True)
class RepairPolicy:
    condition_type: str
    status: str
    toleration_seconds: float


@dataclass(frozen=True, slots=True)
class Unhealthy:
    """A node condition that matches a repair policy, and since when it has been in that status."""

    condition_type: str
    status: str
    since: datetime | None


_MINUTE = 60.0

REPAIR_POLICIES: tuple[RepairPolicy, ...] = (
    RepairPolicy("Ready", "False", 30 * _MINUTE),
    RepairPolicy("Ready", "Unknown", 30 * _MINUTE),
    RepairPolicy("AcceleratedHardwareReady", "False", 10 * _MINUTE),
    RepairPolicy("StorageReady", "False", 30 * _MINUTE),
    RepairPolicy("NetworkingReady", "False", 30 * _MINUTE),
    RepairPolicy("KernelReady", "False", 30 * _MINUTE),
    RepairPolicy("ContainerRuntimeReady", "False", 30 * _MINUTE),
)

_WATCHED = frozenset((p.condition_type, p.status) for p in REPAIR_POLICIES)


def watched(condition_type: str, status: str) -> bool:
    """The (type, status) is one some policy repairs: only these are kept on the Node model, so a
    healthy node carries none."""
    return (condition_type, status) in _WATCHED
