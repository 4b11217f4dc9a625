"""The catalog with the reserved offerings of each pool's capacity reservations, resolved through the
cloud: provisioning plans with it and consolidation prices replacements with it, so both see the
same reservations (Karpenter resolves offerings per NodeClass for both)."""

from __future__ import annotations

import logging

from extender.api.capacity_reservations import CapacityReservation
from extender.api.provisioner import Provisioner
from extender.cloud.types import CloudError, CloudProvider
from extender.scheduling import reservations
from extender.scheduling.instancetypes import InstanceType

log = logging.getLogger(__name__)


def reserved_catalog(
    cloud: CloudProvider, catalog: list[InstanceType], provisioners: list[Provisioner]
) -> tuple[list[InstanceType], list[Provisioner]]:
    """A pool whose reservations cannot be resolved now plans without them (on-demand/spot), with
    a warning."""
    found: dict[str, list[CapacityReservation]] = {}
    for pool in provisioners:
        if not pool.provider.capacity_reservation_selector:
            continue
        try:
            found[pool.name] = cloud.capacity_reservations(pool.provider.capacity_reservation_selector)
        except CloudError as err:
            log.warning("Resolving capacity reservations for %s %s failed, %s", pool.noun, pool.name, err)
    if not found:
        return catalog, provisioners
    return reservations.attach(catalog, provisioners, found)
