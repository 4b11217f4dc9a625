"""What every lifecycle worker is handed: API clients, cloud, shared state, clock, recorder.

One value passed explicitly instead of module globals, so the workers can be built twice in one
process (two replicas in a test) and driven with a fake clock in unit tests.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from extender.api.pod import Pod
    from extender.api.provisioner import Provisioner
    from extender.cloud.types import CloudProvider, OfferingKey
    from extender.lifecycle.events import Recorder
    from extender.settings import Settings

log = logging.getLogger("karpy.lifecycle")


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
    """The part of ClusterState the lifecycle writes (extender/state.py, provisioning owner)."""

    def mark_for_removal(self, node: str, reason: str) -> None: ...

    def unmark(self, node: str) -> None: ...


class Replacements(Protocol):
    """The part of the provisioning controller the lifecycle calls."""

    def provision_replacements(self, pods: Sequence[Pod]) -> list[str]: ...

    def adopt_instances(self) -> list[str]: ...

    def refresh_status(self, provisioner_names: Iterable[str]) -> None: ...

    def registration_failed(self, pool: Provisioner, message: str) -> None: ...

    def joined(self, pool: Provisioner) -> None: ...


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
        if self.state is not None:
            self.state.mark_for_removal(node, reason)

    def unmark(self, node: str) -> None:
        if self.state is not None:
            self.state.unmark(node)
