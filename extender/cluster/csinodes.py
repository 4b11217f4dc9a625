"""CSINode reads: each node's attach limit per CSI driver (`spec.drivers[].allocatable.count`), the
limit kube-scheduler's NodeVolumeLimits applies. A driver without a count is unlimited."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kubernetes import client

from extender.cluster.errors import translated
from extender.cluster.watch import list_objects

Limits = dict[str, tuple[tuple[str, int], ...]]


def list_limits(kube: client.ApiClient) -> Limits:
    """Node name -> (driver, attach limit) for every CSINode (one list call)."""
    with translated("listing CSINodes"):
        items, _ = list_objects(client.StorageV1Api(kube).list_csi_node)
    return limits_by_node(items)


def limits_by_node(csinodes: Iterable[Mapping[str, Any]]) -> Limits:
    result: Limits = {}
    for item in csinodes:
        name = str((item.get("metadata") or {}).get("name") or "")
        drivers = (item.get("spec") or {}).get("drivers") or ()
        counts = []
        for driver in drivers:
            count = ((driver or {}).get("allocatable") or {}).get("count")
            if isinstance(count, int) and not isinstance(count, bool) and driver.get("name"):
                counts.append((str(driver["name"]), count))
        if name and counts:
            result[name] = tuple(sorted(counts))
    return result
