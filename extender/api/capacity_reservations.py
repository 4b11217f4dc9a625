"""On-demand capacity reservations and capacity blocks an EC2NodeClass selects (Karpenter AWS v1.3+).

`ReservationTerm` is one `capacityReservationSelectorTerm` (an `id`, or `tags` / `instanceMatchCriteria`
narrowed by `ownerID`; terms ORed). `CapacityReservation` is one reservation as EC2 describes it,
whichever source found it (the cloud provider: DescribeCapacityReservations or the declared fallback).
Pure data: the time a reservation is judged at is always passed in.

Source: aws/karpenter-provider-aws v1.14.1 `pkg/apis/v1/ec2nodeclass.go` CapacityReservationSelectorTerm,
`pkg/apis/v1/ec2nodeclass_status.go` CapacityReservation and CapacityReservationFromEC2.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from extender.api import labels as wk

#: `reservationType`: an ordinary ODCR, or an EC2 Capacity Block for ML (which must end).
DEFAULT, CAPACITY_BLOCK = "default", "capacity-block"
RESERVATION_TYPES = (DEFAULT, CAPACITY_BLOCK)
INSTANCE_MATCH_CRITERIA = ("open", "targeted")
#: `state`: a capacity block is `expiring` from 40 minutes before its end, 10 minutes before EC2
#: starts terminating its instances (30 minutes before the end): Karpenter drains its nodes then.
ACTIVE, EXPIRING = "active", "expiring"
EXPIRATION_PERIOD = timedelta(minutes=40)


@dataclass(frozen=True)
class ReservationTerm:
    id: str = ""
    owner_id: str = ""
    tags: Mapping[str, str] = field(default_factory=dict)
    instance_match_criteria: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The term as the manifest writes it."""
        if self.id:
            return {"id": self.id}
        found: dict[str, Any] = {}
        if self.tags:
            found["tags"] = dict(self.tags)
        if self.owner_id:
            found["ownerID"] = self.owner_id
        if self.instance_match_criteria:
            found["instanceMatchCriteria"] = self.instance_match_criteria
        return found

    def matches(self, reservation: CapacityReservation) -> bool:
        """The term selects the reservation as DescribeCapacityReservations filters it (Karpenter's
        Query: an id alone; else every tag ("*" = any value of the key), owner and match criteria)."""
        if self.id:
            return reservation.id == self.id
        if self.owner_id and reservation.owner_id != self.owner_id:
            return False
        if (
            self.instance_match_criteria
            and reservation.instance_match_criteria != self.instance_match_criteria
        ):
            return False
        return all(
            key in reservation.tags and value in ("*", reservation.tags[key])
            for key, value in self.tags.items()
        )


ReservationSelector = tuple[ReservationTerm, ...]


@dataclass(frozen=True)
class CapacityReservation:
    id: str
    instance_type: str
    zone: str
    owner_id: str
    #: Instances the reservation can still take (EC2's AvailableInstanceCount).
    available: int
    total: int
    instance_match_criteria: str = "targeted"
    reservation_type: str = DEFAULT
    interruptible: bool = False
    #: None: the reservation has no end date (an ODCR may run until cancelled).
    end_time: datetime | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    #: ACTIVE or EXPIRING as judged when it was listed (`state_at`), what the status reports and
    #: planning reads.
    state: str = ACTIVE

    @property
    def is_block(self) -> bool:
        return self.reservation_type == CAPACITY_BLOCK

    def state_at(self, now: datetime) -> str:
        """`expiring` for a capacity block within EXPIRATION_PERIOD of its end, else `active`
        (Karpenter's CapacityReservationFromEC2: default ODCRs are never expiring)."""
        if not self.is_block or self.end_time is None or now < self.end_time - EXPIRATION_PERIOD:
            return ACTIVE
        return EXPIRING

    def ended(self, now: datetime) -> bool:
        """Past its end: EC2 no longer launches into it (Karpenter filters such reservations out)."""
        return self.end_time is not None and self.end_time <= now

    def status(self) -> dict[str, Any]:
        """The EC2NodeClass `status.capacityReservations` entry (Karpenter's CapacityReservation)."""
        entry: dict[str, Any] = {
            "availabilityZone": self.zone,
            "id": self.id,
            "instanceMatchCriteria": self.instance_match_criteria,
            "instanceType": self.instance_type,
            "ownerID": self.owner_id,
            "reservationType": self.reservation_type,
            "interruptible": self.interruptible,
            "state": self.state,
        }
        if self.end_time is not None:
            entry["endTime"] = self.end_time.strftime("%Y-%m-%dT%H:%M:%SZ")
        return entry

    def node_labels(self) -> dict[str, str]:
        """The labels a node launched into it carries (Karpenter's instanceToNodeClaim)."""
        return {
            wk.CAPACITY_RESERVATION_ID: self.id,
            wk.CAPACITY_RESERVATION_TYPE: self.reservation_type,
            wk.CAPACITY_RESERVATION_INTERRUPTIBLE: str(self.interruptible).lower(),
        }


def selected(
    reservations: list[CapacityReservation], terms: ReservationSelector, now: datetime
) -> list[CapacityReservation]:
    """The reservations some term selects that have not ended, each once, in the given order."""
    seen: set[str] = set()
    found = []
    for reservation in reservations:
        if reservation.id in seen or reservation.ended(now):
            continue
        if any(term.matches(reservation) for term in terms):
            seen.add(reservation.id)
            found.append(reservation)
    return found
