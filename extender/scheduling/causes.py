"""Why a pod was left out of a round, set by whichever step left it out; the solver's retry rules
read the cause, never the reason text."""

from __future__ import annotations

from enum import Enum


class Cause(Enum):
    #: No Provisioner's requirements, taints and types take the pod (resolver).
    NO_PROVISIONER = "no provisioner"
    #: No domain satisfies the pod's topology rules (domain planner); counted for no other pod.
    DOMAIN = "domain"
    #: Hostname rules or host ports cannot be met beside the other pods (packer).
    HOST_RULES = "hostname rules"
    #: No instance type has room for the pod (packer).
    NO_ROOM = "no room"
    #: Its Provisioner's limits leave no room (packer, or the last check of the plan).
    LIMITS = "limits"

    @property
    def topology(self) -> bool:
        """Failed on other pods' placement, not on capacity: it may fit once they change."""
        return self in (Cause.DOMAIN, Cause.HOST_RULES)
