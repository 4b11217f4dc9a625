"""Per-pool launch backoff: a pool whose launch failed for a reason retrying cannot fix is not
launched for again until its backoff passes or its spec changes.

Karpenter marks such a NodeClaim `Launched=False` (reason `LaunchFailed`, the error cut to 300
characters) and its controller requeues it with exponential per-item backoff
(kubernetes-sigs/karpenter pkg/controllers/nodeclaim/lifecycle/launch.go); its NodePool carries
`NodeRegistrationHealthy=False` (designs: "NodeRegistrationHealthy Status Condition on NodePool").
karpy has no NodeClaim to requeue before the launch, so the pool holds the backoff: BASE_SECONDS
after the first failure, doubling to CAP_SECONDS, forgotten when the pool's spec (or its node
class) changes or a node of it registers. Non-retryable: an EC2 error that is not throttling, a
server fault or a connection failure (TagLimitExceeded, InvalidParameterValue, ...), and a Node
create refused with a 4xx other than 409/429 (422 `metadata.annotations: Too long`). Capacity
errors are not failures of the pool: they re-plan elsewhere (launch.py).

A node that never joins (the lifecycle's registration TTL, readiness.py) holds the pool the same way
with reason `RegistrationFailed` (Karpenter's liveness: the NodePool's NodeRegistrationHealthy=False,
"Failed to register node"); the Node create of the next launch does not lift that hold, only a node
of the pool becoming Ready does: a pool whose nodes are created and never join (a wrong security
group, AMI or user data) is not launched for again every batch.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from extender.api.provisioner import Provisioner
from extender.cloud.types import CloudError
from extender.cluster.errors import ClusterError

BASE_SECONDS = 60.0
CAP_SECONDS = 900.0

#: Why a pool is held: its launch (or Node create) was refused, or a node of it never joined.
LAUNCH_FAILED = "LaunchFailed"
REGISTRATION_FAILED = "RegistrationFailed"

#: EC2 codes worth retrying as is (botocore's throttling and transient codes, and server faults).
TRANSIENT_CLOUD_CODES = frozenset(
    {
        "",
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottled",
        "RequestThrottledException",
        "RequestLimitExceeded",
        "EC2ThrottledException",
        "TooManyRequestsException",
        "RequestTimeout",
        "RequestTimeoutException",
        "PriorRequestNotComplete",
        "InternalError",
        "InternalFailure",
        "ServiceUnavailable",
        "Unavailable",
    }
)


def permanent_cloud_error(err: CloudError) -> bool:
    """An EC2 refusal the same request will meet again. botocore's own failures (no answer) are
    named by their class (`EndpointConnectionError`, `ReadTimeoutError`): transient; so is a
    resource not found (`InvalidLaunchTemplateName.NotFoundException`), which karpy creates anew or
    EC2's eventual consistency shows soon."""
    code = err.code
    transient_suffixes = ("Error", "Timeout", "NotFound", "NotFoundException")
    return code not in TRANSIENT_CLOUD_CODES and not code.endswith(transient_suffixes)


def permanent_cluster_error(err: ClusterError) -> bool:
    """A Node write the API server will refuse again: a 4xx other than 409 (exists, conflict) and
    429 (throttled)."""
    return 400 <= err.status < 500 and err.status not in (409, 429)


@dataclass(frozen=True)
class Hold:
    until: float
    failures: int
    message: str
    #: LAUNCH_FAILED or REGISTRATION_FAILED: the Event's and the condition's reason.
    reason: str = LAUNCH_FAILED

    def seconds_left(self, now: float) -> float:
        return max(self.until - now, 0.0)


class LaunchBackoff:
    """Thread-safe: launch groups run in parallel. `on_change(pool, hold)` is told of every new
    hold and every hold lifted (hold None), outside the lock (it writes Events and conditions)."""

    def __init__(
        self,
        clock: Callable[[], float],
        on_change: Callable[[Provisioner, Hold | None], None] = lambda _pool, _hold: None,
        *,
        base: float = BASE_SECONDS,
        cap: float = CAP_SECONDS,
    ) -> None:
        self.clock = clock
        self.on_change = on_change
        self.base = base
        self.cap = cap
        self._lock = threading.Lock()
        self._holds: dict[str, tuple[Provisioner, Hold]] = {}

    def blocked(self, pool: Provisioner) -> Hold | None:
        """The pool's hold while it lasts; None once it passed or the pool's spec changed."""
        with self._lock:
            found = self._holds.get(pool.name)
            if found is None:
                return None
            spec, hold = found
            if spec != pool.spec_only():
                del self._holds[pool.name]
                changed = True
            else:
                return hold if self.clock() < hold.until else None
        if changed:
            self.on_change(pool, None)
        return None

    def failed(self, pool: Provisioner, message: str, reason: str = LAUNCH_FAILED) -> Hold:
        """Back the pool off: BASE_SECONDS after its first failure, doubling to CAP_SECONDS."""
        with self._lock:
            found = self._holds.get(pool.name)
            failures = found[1].failures if found is not None and found[0] == pool.spec_only() else 0
            delay = min(self.base * 2 ** min(failures, 30), self.cap)
            hold = Hold(until=self.clock() + delay, failures=failures + 1, message=message, reason=reason)
            self._holds[pool.name] = (pool.spec_only(), hold)
        self.on_change(pool, hold)
        return hold

    def succeeded(self, pool: Provisioner, *, joined: bool = False) -> None:
        """A node of the pool was created (a launch hold is over) or `joined` (any hold is)."""
        with self._lock:
            found = self._holds.get(pool.name)
            known = found is not None and (joined or found[1].reason != REGISTRATION_FAILED)
            if known:
                del self._holds[pool.name]
        if known:
            self.on_change(pool, None)

    def holds(self) -> dict[str, Hold]:
        with self._lock:
            return {name: hold for name, (_spec, hold) in self._holds.items()}
