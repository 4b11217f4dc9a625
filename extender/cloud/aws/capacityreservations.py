"""Capacity reservations an EC2NodeClass selects: DescribeCapacityReservations, or a declared file.

`queries` turns selector terms into DescribeCapacityReservations requests as Karpenter AWS v1.14.1
does (`pkg/providers/capacityreservation/types.go` QueriesFromSelectorTerms and
DescribeCapacityReservationsInput: state=active; an id alone; else owner-id, tag:<k> (tag-key for
"*") and instance-match-criteria filters, MaxResults 1000). `CapacityReservationProvider` runs them,
caches each query's answer for a minute (Karpenter's reservation cache) and keeps the available
instance count of each reservation between answers (Karpenter's availability cache): a launch into
a reservation takes one, a launch refused for capacity leaves none; the next answer says again
(a terminated instance is given back then, not at once as Karpenter's MarkTerminated does).

Where EC2 does not implement the call (moto 5.2.5 answers it with an HTTP 500 and no XML body, its
server logging "NotImplementedError: The describe_capacity_reservations action has not been
implemented"), the reservations declared in `KARPY_AWS_CAPACITY_RESERVATIONS` (a JSON or YAML list)
stand in, matched against the terms as EC2 would filter them. A declared reservation's
`availableInstanceCount` is what it holds beside karpy's nodes: karpy takes away its own live
instances in it (found by the `karpenter.k8s.aws/capacity-reservation-id` tag it puts on them), as
EC2's count would. The log names the source whenever what a NodeClass's terms resolve to changes.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from botocore.exceptions import ClientError
from botocore.parsers import ResponseParserError
from cachetools import TTLCache

from extender.api import capacity_reservations as cr
from extender.api import labels as wk
from extender.cloud.aws import errors
from extender.cloud.aws.instances import LIVE_STATES, to_instance
from extender.cloud.types import CloudError

log = logging.getLogger(__name__)

#: Karpenter's DefaultTTL for the reservation cache.
CACHE_TTL_SECONDS = 60.0
#: EC2's answers for an action a (mock) endpoint does not serve.
NOT_IMPLEMENTED = frozenset({"InvalidAction", "NotImplemented", "UnsupportedOperation"})
API_SOURCE = "DescribeCapacityReservations"

#: A declared reservation's fields (camelCase, as the EC2NodeClass status writes them) -> required.
DECLARED_FIELDS = {
    "id": True,
    "instanceType": True,
    "availabilityZone": True,
    "totalInstanceCount": True,
    "availableInstanceCount": False,
    "endDate": False,
    "ownerId": False,
    "tags": False,
    "reservationType": False,
    "instanceMatchCriteria": False,
    "interruptible": False,
}
DEFAULT_OWNER = "000000000000"


def queries(terms: Sequence[cr.ReservationTerm]) -> list[dict[str, Any]]:
    """The DescribeCapacityReservations requests for `terms` (Karpenter's Query per term)."""
    found = []
    for term in terms:
        filters: list[dict[str, Any]] = [{"Name": "state", "Values": ["active"]}]
        if term.id:
            # MaxResults cannot be used with ids.
            found.append({"Filters": filters, "CapacityReservationIds": [term.id]})
            continue
        if term.owner_id:
            filters.append({"Name": "owner-id", "Values": [term.owner_id]})
        for key, value in sorted(term.tags.items()):
            filters.append(
                {"Name": "tag-key", "Values": [key]}
                if value == "*"
                else {"Name": f"tag:{key}", "Values": [value]}
            )
        if term.instance_match_criteria:
            filters.append({"Name": "instance-match-criteria", "Values": [term.instance_match_criteria]})
        found.append({"Filters": filters, "MaxResults": 1000})
    return found


def from_ec2(item: Mapping[str, Any]) -> cr.CapacityReservation:
    """One DescribeCapacityReservations item (Karpenter's CapacityReservationFromEC2)."""
    end = item.get("EndDate")
    return cr.CapacityReservation(
        id=item["CapacityReservationId"],
        instance_type=item["InstanceType"],
        zone=item["AvailabilityZone"],
        owner_id=str(item.get("OwnerId", "")),
        available=int(item.get("AvailableInstanceCount", 0)),
        total=int(item.get("TotalInstanceCount", 0)),
        instance_match_criteria=str(item.get("InstanceMatchCriteria") or "open"),
        reservation_type=str(item.get("ReservationType") or cr.DEFAULT),
        interruptible=bool(item.get("Interruptible", False)),
        end_time=end.astimezone(UTC) if isinstance(end, datetime) else None,
        tags={t["Key"]: t["Value"] for t in item.get("Tags") or ()},
    )


def _declared(item: Any, path: str, problems: list[str]) -> cr.CapacityReservation | None:
    if not isinstance(item, Mapping):
        problems.append(f"{path}: expected an object")
        return None
    before = len(problems)
    problems += [f"{path}.{key}: unknown field" for key in sorted(set(item) - set(DECLARED_FIELDS))]
    problems += [
        f"{path}.{key}: missing required field"
        for key, need in DECLARED_FIELDS.items()
        if need and key not in item
    ]
    counts = {}
    for key in ("totalInstanceCount", "availableInstanceCount"):
        value = item.get(key, item.get("totalInstanceCount", 0))
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            problems.append(f"{path}.{key}: {value!r} is not a non-negative integer")
        counts[key] = value
    end: datetime | None = None
    if item.get("endDate") is not None:
        try:
            end = datetime.fromisoformat(str(item["endDate"]).replace("Z", "+00:00"))
            end = end if end.tzinfo else end.replace(tzinfo=UTC)
        except ValueError:
            problems.append(f"{path}.endDate: {item['endDate']!r} is not an RFC 3339 time")
    kind = item.get("reservationType", cr.DEFAULT)
    if kind not in cr.RESERVATION_TYPES:
        problems.append(f"{path}.reservationType: {kind!r} not in {list(cr.RESERVATION_TYPES)}")
    if kind == cr.CAPACITY_BLOCK and end is None:
        problems.append(f"{path}.endDate: a capacity block must have an end date")
    tags = item.get("tags") or {}
    if not isinstance(tags, Mapping):
        problems.append(f"{path}.tags: expected a map of strings")
    if len(problems) > before:
        return None
    return cr.CapacityReservation(
        id=str(item["id"]),
        instance_type=str(item["instanceType"]),
        zone=str(item["availabilityZone"]),
        owner_id=str(item.get("ownerId") or DEFAULT_OWNER),
        available=counts["availableInstanceCount"],
        total=counts["totalInstanceCount"],
        instance_match_criteria=str(item.get("instanceMatchCriteria") or "targeted"),
        reservation_type=kind,
        interruptible=bool(item.get("interruptible", False)),
        end_time=end,
        tags={str(k): str(v) for k, v in tags.items()},
    )


def load_declared(path: str) -> list[cr.CapacityReservation]:
    """The reservations a KARPY_AWS_CAPACITY_RESERVATIONS file declares; CloudError naming every
    bad field (path: message) if any is wrong, so a typo never silently drops a reservation."""
    try:
        raw = yaml.safe_load(Path(path).read_text())  # YAML is a superset of JSON
    except (OSError, yaml.YAMLError) as err:
        raise CloudError(
            f"reading capacity reservations from {path}, {err}", code="InvalidReservationFile"
        ) from err
    if not isinstance(raw, list):
        raise CloudError(f"{path}: expected a list of capacity reservations", code="InvalidReservationFile")
    problems: list[str] = []
    found = [_declared(item, f"[{i}]", problems) for i, item in enumerate(raw)]
    if problems:
        raise CloudError(f"{path}: " + "; ".join(problems), code="InvalidReservationFile")
    return [r for r in found if r is not None]


def _not_implemented(err: Exception) -> bool:
    """EC2 (or what stands for it) does not serve DescribeCapacityReservations."""
    if isinstance(err, ClientError):
        return errors.code_of(err) in NOT_IMPLEMENTED
    # moto's server: HTTP 500 with an HTML page where the XML answer should be.
    return isinstance(err, ResponseParserError) and "500 Internal Server Error" in str(err)


class CapacityReservationProvider:
    def __init__(
        self,
        ec2: Any,
        *,
        declared: str = "",
        cluster: str = "",
        timer: Callable[[], float] = time.monotonic,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._ec2 = ec2
        self._declared = declared
        self._cluster = cluster
        self._timer = timer
        self.now = now
        self._answers: TTLCache[str, list[cr.CapacityReservation]] = TTLCache(
            maxsize=256, ttl=CACHE_TTL_SECONDS, timer=timer
        )
        #: reservation id -> instances it can still take (synced at each answer, then counted).
        self._available: dict[str, int] = {}
        self._lock = threading.Lock()
        #: Which source answered last: API_SOURCE or the declared file.
        self.source = ""
        self._logged: dict[str, tuple[str, tuple[str, ...]]] = {}

    def find(self, terms: Sequence[cr.ReservationTerm]) -> list[cr.CapacityReservation]:
        """The active reservations the terms select that have not ended, each with its available
        count as karpy knows it now."""
        if not terms:
            return []
        with self._lock:
            found: list[cr.CapacityReservation] = []
            for query in queries(terms):
                key = json.dumps(query, sort_keys=True)
                if key not in self._answers:
                    self._answers[key] = self._ask(query)
                found += self._answers[key]
            now = self.now()
            chosen = [
                replace(r, available=self._available.get(r.id, r.available), state=r.state_at(now))
                for r in cr.selected(found, tuple(terms), now)
            ]
            # Logged when what the terms resolve to changes (Karpenter's ChangeMonitor), not each batch.
            seen, which = (self.source, tuple(r.id for r in chosen)), json.dumps([t.as_dict() for t in terms])
            if self._logged.get(which) != seen:
                self._logged[which] = seen
                log.info(
                    "Resolved %d capacity reservation(s) from %s: %s",
                    len(chosen),
                    self.source,
                    [r.id for r in chosen],
                )
            return chosen

    def _ask(self, query: Mapping[str, Any]) -> list[cr.CapacityReservation]:
        try:
            pages = self._ec2.get_paginator("describe_capacity_reservations").paginate(**query)
            answer = [from_ec2(item) for page in pages for item in page.get("CapacityReservations", [])]
            source = API_SOURCE
        except (ClientError, ResponseParserError) as err:
            if errors.code_of(err) == "InvalidCapacityReservationId.NotFound":
                answer, source = [], API_SOURCE
            elif self._declared and _not_implemented(err):
                answer, source = self._from_declared(), f"declared file {self._declared}"
            else:
                raise CloudError(
                    f"describing capacity reservations, {err}", code=errors.code_of(err)
                ) from err
        self._sync(answer)
        self.source = source
        return answer

    def _from_declared(self) -> list[cr.CapacityReservation]:
        declared = load_declared(self._declared)
        used = self._karpy_instances()
        return [replace(r, available=max(r.available - used[r.id], 0)) for r in declared]

    def _karpy_instances(self) -> Counter[str]:
        """reservation id -> this cluster's live instances karpy launched into it (by tag)."""
        filters = [
            {"Name": "tag-key", "Values": [wk.CAPACITY_RESERVATION_ID]},
            {"Name": "instance-state-name", "Values": list(LIVE_STATES)},
        ]
        if self._cluster:
            filters.append({"Name": f"tag:karpenter.sh/cluster/{self._cluster}", "Values": ["owned"]})
        with errors.translated("listing instances in capacity reservations"):
            pages = self._ec2.get_paginator("describe_instances").paginate(Filters=filters)
            found = [
                to_instance(raw)
                for page in pages
                for r in page.get("Reservations", [])
                for raw in r["Instances"]
            ]
        return Counter(i.capacity_reservation_id for i in found if i.capacity_reservation_id)

    def _sync(self, reservations: Sequence[cr.CapacityReservation]) -> None:
        for reservation in reservations:
            self._available[reservation.id] = reservation.available

    def mark_launched(self, reservation_id: str, count: int = 1) -> None:
        """Instances launched into it: taken from its count until the next answer says otherwise."""
        with self._lock:
            if reservation_id in self._available:
                self._available[reservation_id] = max(self._available[reservation_id] - count, 0)

    def mark_unavailable(self, reservation_id: str) -> None:
        """EC2 refused a launch into it for capacity: none left until the next answer."""
        with self._lock:
            if reservation_id in self._available:
                self._available[reservation_id] = 0
