"""The CloudProvider interface and the plain data that crosses it.

Launch templates, fleets, AMIs, subnets and pricing stay behind this interface; callers
(provisioning, lifecycle, `karpy plan`) see instance types, launch requests and instances.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from extender.scheduling.instancetypes import OfferingKey

if TYPE_CHECKING:
    from extender.api.capacity_reservations import CapacityReservation, ReservationTerm
    from extender.api.provisioner import Provisioner, Taint
    from extender.scheduling.instancetypes import InstanceType


@dataclass(frozen=True)
class LaunchRequest:
    """Launch `count` identical nodes for one packing: any of `instance_types` (cheapest first)."""

    provisioner: Provisioner
    instance_types: Sequence[str]
    zones: Sequence[str]
    capacity_types: Sequence[str]
    count: int
    labels: Mapping[str, str]
    taints: Sequence[Taint]
    # Idempotency key (EC2 ClientToken) and the tag that lets a restarted controller find the launch.
    launch_id: str
    #: The pods request vpc.amazonaws.com/efa: each node gets every EFA interface its type supports
    #: (Karpenter's launch template EFACount); otherwise it has none and advertises none.
    efa: bool = False
    #: Launch into this capacity reservation only (capacity type "reserved"); "" = none.
    capacity_reservation_id: str = ""


@dataclass(frozen=True)
class Instance:
    id: str
    instance_type: str
    zone: str
    capacity_type: str
    private_dns_name: str
    provider_id: str
    state: str
    launch_time: datetime | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    #: The AMI the instance booted (drift compares it with what its Provisioner resolves to now).
    image_id: str = ""
    #: Its EFA network interfaces (InterfaceType efa or efa-only), what its Node may advertise.
    efa_interfaces: int = 0
    #: The capacity reservation it runs in ("" = none); then `capacity_type` is "reserved".
    capacity_reservation_id: str = ""
    #: The node labels of that reservation (labels.RESERVATION_LABELS), as launched.
    reservation_labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class LaunchResult:
    instances: Sequence[Instance]
    # Offerings the cloud refused for lack of capacity; the caller marks them unavailable and re-plans.
    unavailable: Sequence[OfferingKey] = ()
    errors: Sequence[str] = ()


class CloudError(Exception):
    """A cloud call failed; `code` is the provider's error code when known."""

    def __init__(self, message: str, *, code: str = "") -> None:
        super().__init__(message)
        self.code = code


class InsufficientCapacityError(CloudError):
    def __init__(self, message: str, *, offerings: Sequence[OfferingKey] = (), code: str = "") -> None:
        super().__init__(message, code=code or "InsufficientInstanceCapacity")
        self.offerings = tuple(offerings)


class InstanceNotFoundError(CloudError):
    pass


__all__ = [
    "CloudError",
    "CloudProvider",
    "Instance",
    "InstanceNotFoundError",
    "InsufficientCapacityError",
    "LaunchRequest",
    "LaunchResult",
    "OfferingKey",
]


class CloudProvider(Protocol):
    """Karpenter's verbs, in Python."""

    name: str

    def get_instance_types(self, provisioner: Provisioner | None = None) -> list[InstanceType]:
        """The catalog (with offerings and prices) the provisioner may launch; cached by the provider.
        With a provisioner, it has the reserved offerings of the reservations its NodeClass selects."""
        ...

    def capacity_reservations(self, terms: Sequence[ReservationTerm]) -> list[CapacityReservation]:
        """The active capacity reservations the terms select (a NodeClass's
        `capacityReservationSelectorTerms`, or ids), with the instances each can still take."""
        ...

    def create(self, request: LaunchRequest) -> LaunchResult:
        """Launch nodes in one call; raises InsufficientCapacityError when nothing could be launched."""
        ...

    def prepare(self, requests: Sequence[LaunchRequest]) -> None:
        """Resolve and cache what `create` needs for such requests, launching nothing (warm-up)."""
        ...

    def delete(self, instance_id: str) -> None:
        """Terminate; InstanceNotFoundError is raised only for ids the cloud never knew."""
        ...

    def get(self, provider_id: str) -> Instance: ...

    def image_id(self, provisioner: Provisioner, instance_type: InstanceType) -> str:
        """The AMI a node of `instance_type` launched for `provisioner` boots now; drift compares it
        with `Instance.image_id` (the Node's `karpenter.k8s.aws/instance-ami-id` annotation)."""
        ...

    def list(self) -> list[Instance]:
        """Every live instance this cluster's karpy launched (by tag)."""
        ...
