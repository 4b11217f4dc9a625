"""Subnets a node class may launch into, found by its subnet selector terms (cached 60 s)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from extender.api.nodeclass import Selector, show_terms
from extender.cloud.aws import errors
from extender.cloud.aws.selectors import Filters, SelectorCache, filter_sets, union
from extender.cloud.types import CloudError


def describe_subnets(ec2: Any, filters: Filters) -> list[dict[str, Any]]:
    with errors.translated("describing subnets"):
        pages = ec2.get_paginator("describe_subnets").paginate(Filters=filters)
        return [subnet for page in pages for subnet in page.get("Subnets", [])]


def one_per_zone(subnets: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """zone -> the subnet with the most free addresses there (ties by id, so the choice is stable)."""
    best: dict[str, dict[str, Any]] = {}
    for subnet in sorted(subnets, key=lambda s: (-int(s.get("AvailableIpAddressCount", 0)), s["SubnetId"])):
        best.setdefault(subnet["AvailabilityZone"], subnet)
    return dict(sorted(best.items()))


class SubnetProvider:
    def __init__(self, ec2: Any, *, timer: Callable[[], float] = time.monotonic) -> None:
        self._cache = SelectorCache(lambda filters: describe_subnets(ec2, filters), timer=timer)

    def get(self, selector: Selector) -> list[dict[str, Any]]:
        """Subnets any of the terms selects, each once."""
        sets = filter_sets(selector, id_filter="subnet-id")
        subnets = union((self._cache.get(filters) for filters in sets), "SubnetId")
        if not subnets:
            raise CloudError(f"no subnets matched selector {show_terms(selector)}", code="NoSubnets")
        return subnets

    def by_zone(self, selector: Selector) -> dict[str, dict[str, Any]]:
        return one_per_zone(self.get(selector))
