"""Tag selectors (Provisioner `subnetSelector`, `securityGroupSelector`) as EC2 filters, cached.

Used by subnets.py and securitygroups.py. A value of "*" means "has the tag"; a comma-separated
value matches any of its parts; entries are ANDed, as in Karpenter.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from cachetools import TTLCache

#: Karpenter 0.5's CacheTTL for subnets, security groups, AMIs and launch templates.
CACHE_TTL_SECONDS = 60.0

Filters = list[dict[str, Any]]


def to_filters(selector: Mapping[str, str]) -> Filters:
    filters: Filters = []
    for key, value in sorted(selector.items()):
        if value == "*":
            filters.append({"Name": "tag-key", "Values": [key]})
        else:
            filters.append({"Name": f"tag:{key}", "Values": [part.strip() for part in value.split(",")]})
    return filters


def cluster_selector(cluster: str) -> dict[str, str]:
    """What a Provisioner without a selector discovers: resources tagged for the cluster."""
    return {f"kubernetes.io/cluster/{cluster}": "*"}


def tags_of(resource: Mapping[str, Any]) -> dict[str, str]:
    return {tag["Key"]: tag.get("Value", "") for tag in resource.get("Tags", [])}


class SelectorCache:
    """selector -> EC2 resources, fetched at most once per TTL; concurrent callers share one fetch."""

    def __init__(
        self,
        fetch: Callable[[Filters], list[dict[str, Any]]],
        *,
        ttl: float = CACHE_TTL_SECONDS,
        timer: Callable[[], float] = time.monotonic,
    ) -> None:
        self._fetch = fetch
        self._cache: TTLCache[frozenset[tuple[str, str]], list[dict[str, Any]]] = TTLCache(
            maxsize=64, ttl=ttl, timer=timer
        )
        self._lock = threading.Lock()

    def get(self, selector: Mapping[str, str]) -> list[dict[str, Any]]:
        key = frozenset(selector.items())
        with self._lock:
            if key not in self._cache:
                self._cache[key] = self._fetch(to_filters(selector))
            return self._cache[key]
