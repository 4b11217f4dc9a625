"""The Provisioners the pod webhook chooses from: listed from the API server, cached briefly.

Pod admission must never wait long or fail because of this list: a failed list is remembered for
a short while and reported as None, which the pod handler answers by admitting the pod unchanged.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cachetools import TLRUCache
from marshmallow import ValidationError

from extender.api import labels
from extender.api.nodepool import API_VERSION as NODEPOOL_API_VERSION
from extender.api.nodepool import KIND, PLURAL, load_nodepool
from extender.api.provisioner import Provisioner
from extender.api.provisioner_schema import load_provisioner
from extender.api.schema_text import summarize

log = logging.getLogger(__name__)

Fetch = Callable[[], Sequence[Mapping[str, Any]]]
_KEY = "provisioners"


class ProvisionerSource:
    """Thread-safe (gunicorn gthread) cached list of valid Provisioners; None while the list is failing."""

    def __init__(
        self,
        fetch: Fetch,
        *,
        ttl: float,
        failure_ttl: float,
        timer: Callable[[], float] = time.monotonic,
        on_fetch: Callable[[str], None] = lambda _result: None,
    ) -> None:
        self._fetch = fetch
        self._on_fetch = on_fetch
        self._lock = threading.Lock()
        self._cache: TLRUCache[str, tuple[Provisioner, ...] | None] = TLRUCache(
            maxsize=1,
            ttu=lambda _k, value, now: now + (ttl if value is not None else failure_ttl),
            timer=timer,
        )

    def get(self) -> tuple[Provisioner, ...] | None:
        # The lock is held across the fetch so a burst of pods causes one list, not one per thread.
        with self._lock:
            try:
                return self._cache[_KEY]
            except KeyError:
                value = self._load()
                self._cache[_KEY] = value
                return value

    def _load(self) -> tuple[Provisioner, ...] | None:
        try:
            items = self._fetch()
        except Exception as err:  # any failure means "unknown", never a failed admission
            log.warning("Listing provisioners failed, admitting pods unchanged for now, %s", err)
            self._on_fetch("error")
            return None
        self._on_fetch("ok")
        loaded = []
        for item in items:
            try:
                loaded.append(load_nodepool(item) if item.get("kind") == KIND else load_provisioner(item))
            except ValidationError as err:
                name = (item.get("metadata") or {}).get("name", "?")
                log.warning(
                    "Ignoring invalid provisioner %s: %s", name, summarize(list(map(str, err.messages)))
                )
        return tuple(loaded)


def kube_fetch(*, kubeconfig: str, timeout: float) -> Fetch:
    """List karpenter.sh/v1alpha5 Provisioners and v1 NodePools with the kubernetes client (created on
    first use)."""
    api: list[Any] = []

    def fetch() -> Sequence[Mapping[str, Any]]:
        if not api:
            from kubernetes import client

            from extender.cluster.client import load
            from extender.settings import Settings

            api.append(client.CustomObjectsApi(load(Settings(kubeconfig=kubeconfig))))
        group, version = labels.API_VERSION.split("/")
        result = api[0].list_cluster_custom_object(group, version, "provisioners", _request_timeout=timeout)
        items = list(result.get("items") or [])
        group, version = NODEPOOL_API_VERSION.split("/")
        try:
            pools = api[0].list_cluster_custom_object(group, version, PLURAL, _request_timeout=timeout)
        except Exception as err:  # no NodePool CRD: Provisioners only
            if getattr(err, "status", None) != 404:
                raise
            pools = {}
        # The list response leaves kind out of items; loading picks the schema by it.
        return items + [{**item, "kind": KIND} for item in pools.get("items") or []]

    return fetch
