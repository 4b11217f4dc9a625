"""An in-memory CloudProvider for tests and dry runs: records every call, launches from a catalog,
and fails on demand (injected errors, offerings without capacity, fleets cut short).

It keeps the contract of `extender.cloud.types.CloudProvider` the AWS provider keeps: `create`
raises InsufficientCapacityError when nothing could be launched and reports refused offerings of a
partial launch in `LaunchResult.unavailable`; `delete` of an unknown id raises
InstanceNotFoundError; `list` returns the live instances. Thread-safe (launch groups call `create`
from a pool).
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from extender.api import labels as wk
from extender.cloud.types import (
    Instance,
    InstanceNotFoundError,
    InsufficientCapacityError,
    LaunchRequest,
    LaunchResult,
    OfferingKey,
)

if TYPE_CHECKING:
    from extender.api.capacity_reservations import CapacityReservation, ReservationTerm
    from extender.api.provisioner import Provisioner
    from extender.scheduling.instancetypes import InstanceType


@dataclass
class Call:
    verb: str
    args: tuple[Any, ...] = ()


@dataclass
class FakeCloudProvider:
    catalog: Sequence[InstanceType] = ()
    name: str = "fake"
    #: Offerings that have no capacity: `create` skips them (and reports them when it tried them).
    no_capacity: set[OfferingKey] = field(default_factory=set)
    #: At most this many instances per `create` (a fleet cut short), None for no limit.
    max_per_launch: int | None = None
    #: The AMI every node boots now (`image_id`), by Provisioner name; "ami-fake" when unnamed.
    images: dict[str, str] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    requests: list[LaunchRequest] = field(default_factory=list)
    instances: dict[str, Instance] = field(default_factory=dict)
    _errors: dict[str, deque[BaseException | Callable[..., BaseException]]] = field(default_factory=dict)
    _ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def fail_next(self, verb: str, *errors: BaseException | Callable[..., BaseException]) -> None:
        """The next calls of `verb` ("create", "delete", ...) raise `errors`, one per call; an error
        may be given as a function of the call's arguments (e.g. refusing what a request asks for)."""
        with self._lock:
            self._errors.setdefault(verb, deque()).extend(errors)

    def _record(self, verb: str, *args: Any) -> None:
        with self._lock:
            self.calls.append(Call(verb, args))
            queued = self._errors.get(verb)
            err = queued.popleft() if queued else None
        if err is not None:
            raise err if isinstance(err, BaseException) else err(*args)

    def verbs(self) -> list[str]:
        with self._lock:
            return [c.verb for c in self.calls]

    def get_instance_types(self, provisioner: Provisioner | None = None) -> list[InstanceType]:
        self._record("get_instance_types", provisioner)
        return list(self.catalog)

    def capacity_reservations(self, terms: Sequence[ReservationTerm]) -> list[CapacityReservation]:
        self._record("capacity_reservations", terms)
        return []

    def prepare(self, requests: Sequence[LaunchRequest]) -> None:
        self._record("prepare", *requests)

    def create(self, request: LaunchRequest) -> LaunchResult:
        with self._lock:
            self.requests.append(request)
        self._record("create", request)
        offerings = [
            OfferingKey(t, z, c)
            for c in request.capacity_types
            for t in request.instance_types
            for z in sorted(request.zones)
        ]
        with self._lock:
            refused = [o for o in offerings if o in self.no_capacity]
            usable = [o for o in offerings if o not in self.no_capacity]
            if not usable:
                raise InsufficientCapacityError(
                    f"no capacity for {len(offerings)} offering(s)", offerings=refused
                )
            count = request.count if self.max_per_launch is None else min(request.count, self.max_per_launch)
            launched = [self._launch(usable[0], request) for _ in range(count)]
        # A fleet cut short names the offerings it could not fill, as CreateFleet's errors do.
        unavailable = (usable[0],) if count < request.count else ()
        return LaunchResult(instances=launched, unavailable=(*refused, *unavailable))

    def _launch(self, offering: OfferingKey, request: LaunchRequest) -> Instance:
        n = next(self._ids)
        instance = Instance(
            id=f"i-{n:04d}",
            instance_type=offering.instance_type,
            zone=offering.zone,
            capacity_type=offering.capacity_type,
            private_dns_name=f"ip-10-0-0-{n}.ec2.internal",
            provider_id=f"aws:///{offering.zone}/i-{n:04d}",
            state="running",
            launch_time=datetime.now(UTC),
            tags={
                request.provisioner.owner_label: request.provisioner.name,
                wk.LAUNCH_ID_TAG: request.launch_id,
            },
            image_id=self.images.get(request.provisioner.name, "ami-fake"),
        )
        self.instances[instance.id] = instance
        return instance

    def image_id(self, provisioner: Provisioner, instance_type: InstanceType) -> str:
        self._record("image_id", provisioner.name, instance_type.name)
        return self.images.get(provisioner.name, "ami-fake")

    def delete(self, instance_id: str) -> None:
        self._record("delete", instance_id)
        with self._lock:
            instance = self.instances.get(instance_id)
            if instance is None:
                raise InstanceNotFoundError(f"instance {instance_id} not found")
            self.instances[instance_id] = replace(instance, state="terminated")

    def get(self, provider_id: str) -> Instance:
        self._record("get", provider_id)
        instance_id = provider_id.rstrip("/").rsplit("/", 1)[-1]
        with self._lock:
            instance = self.instances.get(instance_id)
        if instance is None:
            raise InstanceNotFoundError(f"instance {provider_id} not found")
        return instance

    def list(self) -> list[Instance]:
        self._record("list")
        with self._lock:
            return [i for i in self.instances.values() if i.state != "terminated"]
