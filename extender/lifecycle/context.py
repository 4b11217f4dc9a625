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
    from extender.cloud.types import CloudProvider, Instance, OfferingKey
    from extender.lifecycle.events import Recorder
    from extender.settings import Settings

log = logging.getLogger("karpy.lifecycle")


def utcnow() -> datetime:
    return datetime.now(UTC)


class RemovalMarks(Protocol):
    """The part of ClusterState the lifecycle writes (extender/state.py, provisioning owner)."""

    def mark_for_removal(self, node: str, reason: str) -> None: ...

    def unmark(self, node: str) -> None: ...


class Replacements(Protocol):
    """The part of the provisioning controller the lifecycle calls."""

    def provision_replacements(self, pods: Sequence[Any]) -> list[str]: ...

    def adopt_instances(self, instances: Sequence[Instance]) -> list[str]: ...

    def refresh_status(self, provisioner_names: Iterable[str]) -> None: ...


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
