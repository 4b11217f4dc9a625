"""Prometheus metrics for any CloudProvider, added by wrapping it (provider code has no metrics).

`decorate(provider)` times every interface method (`karpy_cloudprovider_duration_seconds`) and
counts failures by error code (`karpy_cloudprovider_errors_total`), as Karpenter's
cloudprovider/metrics.Decorate does. Methods outside the interface pass through untimed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from prometheus_client import Counter, Histogram

from extender.cloud.types import CloudProvider, Instance, LaunchRequest, LaunchResult

if TYPE_CHECKING:
    from extender.api.capacity_reservations import CapacityReservation, ReservationTerm
    from extender.api.provisioner import Provisioner
    from extender.scheduling.instancetypes import InstanceType

T = TypeVar("T")

DURATION = Histogram(
    "karpy_cloudprovider_duration_seconds",
    "Duration of cloud provider method calls.",
    ["provider", "method"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
ERRORS = Counter(
    "karpy_cloudprovider_errors_total",
    "Failed cloud provider method calls, by error code.",
    ["provider", "method", "code"],
)


def error_code(err: BaseException) -> str:
    return getattr(err, "code", "") or type(err).__name__


class MeteredCloudProvider:
    def __init__(self, provider: CloudProvider) -> None:
        self.provider = provider
        self.name = provider.name

    def _timed(self, method: str, call: Callable[[], T]) -> T:
        started = time.perf_counter()
        try:
            return call()
        except Exception as err:
            ERRORS.labels(self.name, method, error_code(err)).inc()
            raise
        finally:
            DURATION.labels(self.name, method).observe(time.perf_counter() - started)

    def get_instance_types(self, provisioner: Provisioner | None = None) -> list[InstanceType]:
        return self._timed("get_instance_types", lambda: self.provider.get_instance_types(provisioner))

    def capacity_reservations(self, terms: Sequence[ReservationTerm]) -> list[CapacityReservation]:
        return self._timed("capacity_reservations", lambda: self.provider.capacity_reservations(terms))

    def create(self, request: LaunchRequest) -> LaunchResult:
        return self._timed("create", lambda: self.provider.create(request))

    def prepare(self, requests: Sequence[LaunchRequest]) -> None:
        self._timed("prepare", lambda: self.provider.prepare(requests))

    def delete(self, instance_id: str) -> None:
        self._timed("delete", lambda: self.provider.delete(instance_id))

    def get(self, provider_id: str) -> Instance:
        return self._timed("get", lambda: self.provider.get(provider_id))

    def image_id(self, provisioner: Provisioner, instance_type: InstanceType) -> str:
        return self._timed("image_id", lambda: self.provider.image_id(provisioner, instance_type))

    def list(self) -> list[Instance]:
        return self._timed("list", self.provider.list)

    def __getattr__(self, name: str) -> Any:
        # Provider extras (find_launch, mark_unavailable, ...) stay reachable through the wrapper.
        return getattr(self.provider, name)


def decorate(provider: CloudProvider) -> MeteredCloudProvider:
    return MeteredCloudProvider(provider)
