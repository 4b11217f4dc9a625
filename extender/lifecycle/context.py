"""What every lifecycle worker is handed: API clients, cloud, shared state, clock, recorder.

One value passed explicitly instead of module globals, so the workers can be built twice in one
process (two replicas in a test) and driven with a fake clock in unit tests.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from extender.api import labels
from extender.api.provisioner import Taint
from extender.lifecycle import nodepatch

if TYPE_CHECKING:
    from extender.api.node import Node
    from extender.api.pod import Pod
    from extender.api.provisioner import Provisioner
    from extender.cloud.types import CloudProvider, OfferingKey
    from extender.lifecycle.events import Recorder
    from extender.scheduling.instancetypes import InstanceType
    from extender.settings import Settings

log = logging.getLogger("karpy.lifecycle")

DISRUPTED = Taint(labels.DISRUPTED_TAINT_KEY, "NoSchedule")
DISRUPTED_TEXT = f"{DISRUPTED.key}:{DISRUPTED.effect}"


def utcnow() -> datetime:
    return datetime.now(UTC)


def go_duration(seconds: float) -> str:
    """Go's time.Duration text for whole seconds (30s, 5m0s, 1h0m0s), as Karpenter's log lines print it."""
    total = int(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"


class RemovalMarks(Protocol):
    """The part of ClusterState the lifecycle writes and reads (extender/state.py, provisioning
    owner)."""

    def mark_for_removal(self, node: str, reason: str) -> bool: ...

    def unmark(self, node: str) -> bool: ...

    def removal_reason(self, node: str) -> str | None: ...

    def marked(self) -> Mapping[str, str]: ...

    #: Nodes holding capacity promised to pods provisioning is binding now (consolidation waits).
    def reserved_nodes(self) -> frozenset[str]: ...

    #: Whether the running provisioning batch launched the node and binds to it (readiness waits).
    def binding(self, node: str) -> bool: ...


class Overlaying(Protocol):
    """Provisioning's NodeOverlays (extender/provisioning/overlays.py)."""

    def apply(
        self, provisioners: Sequence[Provisioner], catalog: Sequence[InstanceType]
    ) -> list[Provisioner]: ...


class Replacements(Protocol):
    """The part of the provisioning controller the lifecycle calls."""

    def provision_replacements(self, pods: Sequence[Pod]) -> list[str]: ...

    def adopt_instances(self) -> list[str]: ...

    def refresh_status(self, provisioner_names: Iterable[str]) -> None: ...

    def registration_failed(self, pool: Provisioner, message: str) -> None: ...

    def joined(self, pool: Provisioner) -> None: ...

    # Read by consolidation, so a replacement is planned as provisioning would launch it:
    @property
    def unavailable(self) -> Iterable[OfferingKey]:
        """Offerings EC2 refused lately (the ICE cache)."""
        ...

    @property
    def overlays(self) -> Overlaying: ...


@dataclass
class Context:
    settings: Settings
    kube: Any  # kubernetes.client.ApiClient
    cloud: CloudProvider
    state: RemovalMarks | None
    provisioning: Replacements | None
    recorder: Recorder
    is_leader: Callable[[], bool] = lambda: True
    clock: Callable[[], datetime] = utcnow
    unavailable: Callable[[OfferingKey], None] | None = None
    log: logging.Logger = field(default=log)

    def mark(self, node: str, reason: str) -> None:
        """Mark the node for removal and taint it `karpy.sh/disrupted:NoSchedule`, so kube-scheduler
        keeps new pods off it without calling the extender (Karpenter v1 taints
        `karpenter.sh/disrupted` before it drains). Tainted once per mark; a failed taint leaves
        the node unmarked and raises, so the caller's retry marks it again."""
        if self.state is None or not self.state.mark_for_removal(node, reason):
            return
        try:
            if nodepatch.add_taint(self.kube, node, DISRUPTED):
                self.log.info("Tainted node %s %s, %s", node, DISRUPTED_TEXT, reason)
        except Exception:
            self.state.unmark(node)
            raise

    def unmark(self, node: str) -> None:
        """The node keeps serving (or is gone): its mark and its disrupted taint go."""
        if self.state is not None and self.state.unmark(node):
            self._untaint(node)

    def release_stale_taint(self, node: Node) -> None:
        """A disrupted taint with no mark behind it (left by a restart, a failover or a failed
        action) goes: Karpenter v1's disruption controller removes its taint from nodes it is not
        disrupting in the same way. A mark made meanwhile by another worker gets its taint back."""
        if self.state is None or node.deleting or not node.has_taint(labels.DISRUPTED_TAINT_KEY):
            return
        if self.state.removal_reason(node.name) is not None:
            return
        self._untaint(node.name)
        if (reason := self.state.removal_reason(node.name)) is not None:
            nodepatch.add_taint(self.kube, node.name, DISRUPTED)
            self.log.debug("Node %s was marked again (%s) while its taint was removed", node.name, reason)

    def _untaint(self, node: str) -> None:
        if nodepatch.drop_taint(self.kube, node, labels.DISRUPTED_TAINT_KEY):
            self.log.info("Removed %s taint from node %s", DISRUPTED_TEXT, node)
