"""Security groups for a node class's nodes, found by its security-group selector terms (cached 60 s)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from extender.api.nodeclass import Selector, show_terms
from extender.cloud.aws import errors
from extender.cloud.aws.selectors import Filters, SelectorCache, filter_sets, tags_of, union
from extender.cloud.types import CloudError


def describe_security_groups(ec2: Any, filters: Filters) -> list[dict[str, Any]]:
    with errors.translated("describing security groups"):
        pages = ec2.get_paginator("describe_security_groups").paginate(Filters=filters)
        return [group for page in pages for group in page.get("SecurityGroups", [])]


def select_group_ids(groups: list[dict[str, Any]], cluster: str) -> list[str]:
    """All matches, but only the first group tagged for the cluster: the AWS load balancer controller
    puts that tag on its own groups, and an ENI with two of them breaks its target registration."""
    cluster_tag = f"kubernetes.io/cluster/{cluster}"
    ids: list[str] = []
    seen_cluster_group = False
    for group in sorted(groups, key=lambda g: g["GroupId"]):
        if cluster_tag in tags_of(group):
            if seen_cluster_group:
                continue
            seen_cluster_group = True
        ids.append(group["GroupId"])
    return ids


class SecurityGroupProvider:
    def __init__(self, ec2: Any, *, cluster: str, timer: Callable[[], float] = time.monotonic) -> None:
        self._cluster = cluster
        self._cache = SelectorCache(lambda filters: describe_security_groups(ec2, filters), timer=timer)

    def ids(self, selector: Selector) -> list[str]:
        """Ids of the groups any of the terms selects (see select_group_ids)."""
        sets = filter_sets(selector, id_filter="group-id", name_filter="group-name")
        groups = union((self._cache.get(filters) for filters in sets), "GroupId")
        ids = select_group_ids(groups, self._cluster)
        if not ids:
            raise CloudError(
                f"no security groups exist given constraints {show_terms(selector)}", code="NoSecurityGroups"
            )
        return ids
