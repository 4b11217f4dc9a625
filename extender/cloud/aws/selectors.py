"""Selectors (subnet and security-group terms, v1alpha5 tag maps) as EC2 filters, cached.

Used by subnets.py, securitygroups.py and amifamily.py. A tag value of "*" means "has the tag";
a term's tags are ANDed. A selector's terms are ORed: as Karpenter v1 builds them
(pkg/providers/subnet/subnet.go, securitygroup/securitygroup.go `getFilterSets`), each tag term is
one filter set, all id terms one more, all name terms one more; the matches are joined by id.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from cachetools import TTLCache

from extender.api.nodeclass import Selector, SelectorTerm

#: Karpenter 0.5's CacheTTL for subnets, security groups, AMIs and launch templates.
CACHE_TTL_SECONDS = 60.0

Filters = list[dict[str, Any]]


def to_filters(selector: Mapping[str, str]) -> Filters:
    """A v1alpha5 tag map (amiSelector): "*" = tag key present, "a,b" = either value."""
    filters: Filters = []
    for key, value in sorted(selector.items()):
        if value == "*":
            filters.append({"Name": "tag-key", "Values": [key]})
        else:
            filters.append({"Name": f"tag:{key}", "Values": [part.strip() for part in value.split(",")]})
    return filters


def tag_filters(tags: Mapping[str, str]) -> Filters:
    """A v1 term's tags: each value matched exactly, "*" = tag key present."""
    return [
        {"Name": "tag-key", "Values": [key]} if value == "*" else {"Name": f"tag:{key}", "Values": [value]}
        for key, value in sorted(tags.items())
    ]


def filter_sets(terms: Selector, *, id_filter: str, name_filter: str = "") -> list[Filters]:
    """One Describe call's filters per tag term, then one for every id, then one for every name."""
    sets = [tag_filters(term.tags) for term in terms if not term.id and not term.name]
    ids = list(dict.fromkeys(term.id for term in terms if term.id))
    names = list(dict.fromkeys(term.name for term in terms if term.name and not term.id))
    if ids:
        sets.append([{"Name": id_filter, "Values": ids}])
    if names and name_filter:
        sets.append([{"Name": name_filter, "Values": names}])
    return sets


def cluster_selector(cluster: str) -> Selector:
    """What a node class without a selector discovers: resources tagged for the cluster."""
    return (SelectorTerm(tags={f"kubernetes.io/cluster/{cluster}": "*"}),)


def tags_of(resource: Mapping[str, Any]) -> dict[str, str]:
    return {tag["Key"]: tag.get("Value", "") for tag in resource.get("Tags", [])}


def union(found: Iterable[list[dict[str, Any]]], id_key: str) -> list[dict[str, Any]]:
    """Resources of every filter set, each once, in the order first found."""
    joined: dict[str, dict[str, Any]] = {}
    for resources in found:
        for resource in resources:
            joined.setdefault(resource[id_key], resource)
    return list(joined.values())


def _key(filters: Filters) -> tuple[tuple[str, tuple[str, ...]], ...]:
    return tuple(sorted((f["Name"], tuple(f["Values"])) for f in filters))


class SelectorCache:
    """filters -> EC2 resources, fetched at most once per TTL; concurrent callers share one fetch."""

    def __init__(
        self,
        fetch: Callable[[Filters], list[dict[str, Any]]],
        *,
        ttl: float = CACHE_TTL_SECONDS,
        timer: Callable[[], float] = time.monotonic,
    ) -> None:
        self._fetch = fetch
        self._cache: TTLCache[tuple[tuple[str, tuple[str, ...]], ...], list[dict[str, Any]]] = TTLCache(
            maxsize=64, ttl=ttl, timer=timer
        )
        self._lock = threading.Lock()

    def get(self, filters: Filters) -> list[dict[str, Any]]:
        key = _key(filters)
        with self._lock:
            if key not in self._cache:
                self._cache[key] = self._fetch(filters)
            return self._cache[key]
