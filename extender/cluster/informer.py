"""List-then-watch loops delivering API JSON to callbacks, re-listing on 410 Gone or errors.

One loop for every watcher in karpy: provisioning's pending-pod watcher, the lifecycle's Node
informer, and the in-memory indexes a batch plans against (`WatchedIndex`: every bound pod, every
node). Built on extender.cluster.watch (stream_objects / watch_objects).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from extender.cluster.errors import ClusterError
from extender.cluster.watch import Gone, stream_objects, watch_objects
from extender.heartbeat import no_tick
from extender.retry import LoopBackoff

log = logging.getLogger("karpy.informer")

Handler = Callable[[str, Mapping[str, Any]], None]

WATCH_SECONDS = 30
#: Seconds an index's watch keeps one watch open; reconnects continue from the last resourceVersion.
INDEX_WATCH_SECONDS = 60
#: How long a reader waits for the first listing of a started index before it gives up.
SYNC_WAIT_SECONDS = 120.0


def run_list_watch(
    list_fn: Callable[..., Any],
    *,
    on_list: Callable[[Iterable[dict[str, Any]], str], None],
    on_event: Callable[[str, dict[str, Any]], None],
    stop: threading.Event,
    name: str,
    watch_seconds: float = WATCH_SECONDS,
    tick: Callable[[], None] = no_tick,
    backoff: LoopBackoff | None = None,
    still_served: Callable[[], bool] | None = None,
    **selectors: Any,
) -> None:
    """`on_list(items, resourceVersion)` at every (re)list (the items stream in page by page as
    `on_list` consumes them), then `on_event(type, obj)` per watch
    event (bookmarks included, so the receiver can track resourceVersion); returns once `stop` is set.
    `tick` is called after every list and every watch call (a heartbeat: both end within
    `watch_seconds` plus a list's time); failed passes re-list after `backoff`, unless
    `still_served()` says the kind's CRD is gone: then it returns (see `start_informer`'s `crd`)."""
    version = ""
    backoff = backoff or LoopBackoff()
    while not stop.is_set():
        try:
            items, version = stream_objects(list_fn, **selectors)
            on_list(items, version)
            backoff.succeeded()
            tick()
            while not stop.is_set():
                for kind, obj in watch_objects(
                    list_fn, version, timeout_seconds=int(watch_seconds), **selectors
                ):
                    version = (obj.get("metadata") or {}).get("resourceVersion") or version
                    on_event(kind, obj)
                    if stop.is_set():
                        return
                tick()
        except Gone:
            log.debug("Watch of %s expired at resourceVersion %s, re-listing", name, version)
        except Exception as err:  # connection reset, apiserver restart: relist after a backoff
            if stop.is_set():
                return
            if still_served is not None and not still_served():
                log.info("Stopped watching %s, no longer served (its CustomResourceDefinition is gone)", name)
                return
            delay = backoff.failed()
            log.warning("Watching %s failed, re-listing in %.1fs, %s", name, delay, err)
            tick()
            stop.wait(delay)


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def tombstone(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What an informer remembers of an object to announce its deletion after a re-list: its
    identity and the node it is on (what the handlers route by), not the whole object."""
    meta = obj.get("metadata") or {}
    stub: dict[str, Any] = {
        "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "labels") if k in meta}
    }
    node = (obj.get("spec") or {}).get("nodeName")
    if node:
        stub["spec"] = {"nodeName": node}
    return stub


def start_informer(
    list_fn: Callable[..., Any],
    handler: Handler,
    stop: threading.Event,
    *,
    name: str,
    tick: Callable[[], None] = no_tick,
    crd: Crd | None = None,
    **selectors: Any,
) -> threading.Thread:
    """`handler("SYNC", obj)` for each listed object, then `handler(type, obj)` per watch event.

    With `crd` (a custom kind), the watch starts only once the API serves the kind and stops when it
    no longer does: a cluster without that CRD (v1alpha5 only: no NodeClaims) gets no failing
    watch and no warning every backoff, and the watch starts when the CRD is applied.

    An object deleted while the watch was down (a failed watch is followed by a re-list, not a
    replay) is missing from the re-list: the handler gets `DELETED` with its `tombstone`, as
    client-go's informers deliver DeletedFinalStateUnknown. Without it a receiver's cache keeps
    the object for good (the node worker counted such nodes as deleting, using up the
    disruption budget, in the chaos run of issue 13)."""
    known: dict[tuple[str, str], dict[str, Any]] = {}

    def on_list(items: Iterable[dict[str, Any]], _version: str) -> None:
        # `items` may be a stream of pages: read once.
        listed: dict[tuple[str, str], dict[str, Any]] = {}
        for obj in items:
            listed[_key(obj)] = tombstone(obj)
            handler("SYNC", obj)
        for key in known.keys() - listed.keys():
            handler("DELETED", known[key])
        known.clear()
        known.update(listed)

    def on_event(kind: str, obj: dict[str, Any]) -> None:
        if kind == "BOOKMARK":
            return
        if kind == "DELETED":
            known.pop(_key(obj), None)
        else:
            known[_key(obj)] = tombstone(obj)
        handler(kind, obj)

    def list_watch(still_served: Callable[[], bool] | None = None) -> None:
        run_list_watch(
            list_fn,
            on_list=on_list,
            on_event=on_event,
            stop=stop,
            name=name,
            tick=tick,
            still_served=still_served,
            **selectors,
        )

    def gated() -> None:
        assert crd is not None
        while not stop.is_set():
            crd.wait_served(stop, tick=tick, what=name)
            if not stop.is_set():
                list_watch(crd.served)

    thread = threading.Thread(target=gated if crd else list_watch, name=f"informer-{name}", daemon=True)
    thread.start()
    return thread


class Crd:
    """A custom kind (group, version, plural) and whether the API serves it, from discovery
    (`GET /apis/<group>/<version>`, readable by every authenticated user, as kubectl discovers it):
    no RBAC on CustomResourceDefinitions is needed."""

    #: Seconds between discovery requests while the kind is not served.
    POLL_SECONDS = 10.0

    def __init__(self, kube: Any, group: str, version: str, plural: str) -> None:
        self.kube, self.group, self.version, self.plural = kube, group, version, plural

    def __str__(self) -> str:
        return f"{self.plural}.{self.group}/{self.version}"

    def served(self) -> bool:
        """True when discovery lists the kind; also True when discovery itself fails for another
        reason (the watch's own backoff handles an unreachable API)."""
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        try:
            found = client.CustomObjectsApi(self.kube).get_api_resources(self.group, self.version)
        except ApiException as err:
            return err.status != 404
        except Exception:  # connection refused, timeout: not evidence the CRD is missing
            return True
        return any(r.name == self.plural for r in found.resources or [])

    def wait_served(self, stop: threading.Event, *, tick: Callable[[], None] = no_tick, what: str) -> None:
        """Return once the kind is served (or `stop` is set), logging once at INFO while it is not."""
        waited = False
        while not stop.is_set() and not self.served():
            if not waited:
                log.info(
                    "Not watching %s until %s is served (its CustomResourceDefinition is not installed)",
                    what,
                    self,
                )
                waited = True
            tick()
            stop.wait(self.POLL_SECONDS)
        if waited and not stop.is_set():
            log.info("Watching %s, %s is now served", what, self)


class WatchedIndex:
    """An in-memory index kept by one list-then-watch: the watch thread writes through `replace`
    (a whole listing, streamed) and `apply` (one event); readers call `wait_synced` first, which
    waits for the first listing of a started watch or, without one (unit tests, one-shot use),
    refreshes the index from a full listing itself. Subclasses guard their data with `_lock`."""

    #: What the index holds, for logs and errors ("bound pods", "nodes").
    name = "objects"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watching = False
        self.synced = threading.Event()
        self.relists = 0
        self.resource_version = ""

    def list_function(self, kube: Any) -> tuple[Callable[..., Any], dict[str, Any]]:
        """The list endpoint and its selectors."""
        raise NotImplementedError

    def replace(self, items: Iterable[Mapping[str, Any]], resource_version: str) -> None:
        raise NotImplementedError

    def apply(self, kind: str, obj: Mapping[str, Any]) -> None:
        raise NotImplementedError

    def run(self, kube: Any, stop: threading.Event, *, tick: Callable[[], None] = no_tick) -> None:
        list_fn, selectors = self.list_function(kube)
        run_list_watch(
            list_fn,
            on_list=self.replace,
            on_event=self.apply,
            stop=stop,
            name=self.name,
            watch_seconds=INDEX_WATCH_SECONDS,
            tick=tick,
            **selectors,
        )

    def start(
        self, kube: Any, stop: threading.Event, *, tick: Callable[[], None] = no_tick
    ) -> threading.Thread:
        self._watching = True
        thread = threading.Thread(
            target=self.run,
            args=(kube, stop),
            kwargs={"tick": tick},
            name=f"informer-{self.name.replace(' ', '-')}",
            daemon=True,
        )
        thread.start()
        return thread

    def wait_synced(self, list_now: Callable[[], Iterable[Mapping[str, Any]]]) -> None:
        if not self._watching:
            self.replace(list_now(), "")
        elif not self.synced.wait(SYNC_WAIT_SECONDS):
            raise ClusterError(f"{self.name} are not listed yet")
