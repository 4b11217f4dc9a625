"""NodeOverlays (karpenter.sh/v1alpha1): the set the controller applies, kept by an informer, and
the status conditions the leader writes on them.

The informer watches only while the CRD is served (informer.Crd), as for NodeClaims. Each object is
loaded as it arrives (extender/api/nodeoverlay.py); one that does not load (stored before the
webhook refused it, or with the webhook out of the path) is left out, with one ERROR line and one
`ValidationFailed` Warning Event per generation and error, and its status says why.

Status is Karpenter's (pkg/apis/v1alpha1/nodeoverlay_status.go, controllers/nodeoverlay): the
condition `ValidationSucceeded` (False with reason `RuntimeValidation` for an overlay that does not
load, `Conflict` "conflict with another overlay" for one left out by the precedence rules) and
`Ready` following it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Mapping
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from marshmallow import ValidationError

from extender.api import nodeoverlay as no
from extender.api.provisioner import Overlay
from extender.cluster import events
from extender.cluster.errors import ClusterError, translated
from extender.cluster.informer import Crd, start_informer
from extender.cluster.pool_resources import error_text, list_custom
from extender.cluster.quarantine import Quarantine, short
from extender.cluster.v1status import condition
from extender.heartbeat import no_tick

log = logging.getLogger("karpy.nodeoverlays")

VALIDATION_SUCCEEDED = "ValidationSucceeded"
READY = "Ready"
CONFLICT = "Conflict"
CONFLICT_MESSAGE = "conflict with another overlay"
RUNTIME_VALIDATION = "RuntimeValidation"

INVALID = Quarantine(no.KIND)
#: The resource this module's calls go to (spelled out: tests/integration/test_manifests.py reads it).
PLURAL = "nodeoverlays"
assert PLURAL == no.PLURAL


def lister(kube: client.ApiClient) -> Callable[..., Any]:
    """The NodeOverlay list call, for an informer to list and watch with."""

    def list_nodeoverlays(**kwargs: Any) -> Any:
        return client.CustomObjectsApi(kube).list_cluster_custom_object(
            no.GROUP, no.VERSION, PLURAL, **kwargs
        )

    return list_nodeoverlays


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


class NodeOverlays:
    """The cluster's NodeOverlays, loaded: fed by `on_event` (the informer's handler), read by
    `current()`. Without a started informer (the CLI, tests) `current(kube)` lists them once."""

    def __init__(self, kube: client.ApiClient | None = None) -> None:
        self.kube = kube
        self._lock = threading.Lock()
        #: name -> (the object as last seen, the Overlay or the reason it did not load).
        self._objects: dict[str, tuple[Mapping[str, Any], Overlay | str]] = {}
        self._watching = False
        #: Set on every change; the status loop waits on it.
        self.changed = threading.Event()

    def on_event(self, kind: str, obj: Mapping[str, Any]) -> None:
        meta = _meta(obj)
        name = str(meta.get("name") or "")
        if kind == "DELETED":
            with self._lock:
                self._objects.pop(name, None)
            INVALID.recovered(name)
            self.changed.set()
            return
        try:
            loaded: Overlay | str = no.load_nodeoverlay(obj)
        except ValidationError as err:
            loaded = error_text(err)
            self._reject(obj, loaded)
        else:
            if INVALID.recovered(name):
                log.info("Loaded nodeoverlay %s, valid again", name)
        with self._lock:
            self._objects[name] = (obj, loaded)
        self.changed.set()

    def _reject(self, obj: Mapping[str, Any], message: str) -> None:
        meta = _meta(obj)
        name = str(meta.get("name") or "")
        if not INVALID.failed(name, meta.get("generation"), message):
            return
        log.error("Ignoring invalid nodeoverlay %s, %s", name, short(message, 1000))
        if self.kube is not None:
            events.record(
                self.kube,
                kind=no.KIND,
                api_version=no.API_VERSION,
                name=name,
                uid=str(meta.get("uid") or ""),
                reason="ValidationFailed",
                message=f"Ignoring invalid nodeoverlay, {short(message)}",
                warning=True,
            )

    def start(self, stop: threading.Event, *, tick: Callable[[], None] = no_tick) -> threading.Thread:
        assert self.kube is not None
        self._watching = True
        return start_informer(
            lister(self.kube),
            self.on_event,
            stop,
            name="nodeoverlays",
            tick=tick,
            crd=Crd(self.kube, no.GROUP, no.VERSION, PLURAL),
        )

    def current(self) -> tuple[Overlay, ...]:
        """The overlays that load, by name (a one-off listing when no informer runs)."""
        if not self._watching and self.kube is not None:
            self.replace(list_custom(self.kube, no.GROUP, no.VERSION, PLURAL))
        with self._lock:
            found = [o for _, o in self._objects.values() if isinstance(o, Overlay)]
        return tuple(sorted(found, key=lambda o: o.name))

    def has_objects(self) -> bool:
        with self._lock:
            return bool(self._objects)

    def replace(self, items: Collection[Mapping[str, Any]]) -> None:
        listed = {str(_meta(obj).get("name") or "") for obj in items}
        with self._lock:
            gone = set(self._objects) - listed
        for name in gone:
            self.on_event("DELETED", {"metadata": {"name": name}})
        for obj in items:
            self.on_event("SYNC", obj)

    def verdicts(self, conflicts: Collection[str]) -> dict[str, tuple[bool, str, str]]:
        """Per overlay: (ValidationSucceeded, reason, message) given the overlays in conflict."""
        with self._lock:
            objects = dict(self._objects)
        result = {}
        for name, (_, loaded) in objects.items():
            if isinstance(loaded, str):
                result[name] = (False, RUNTIME_VALIDATION, short(loaded))
            elif name in conflicts:
                result[name] = (False, CONFLICT, CONFLICT_MESSAGE)
            else:
                result[name] = (True, VALIDATION_SUCCEEDED, "")
        return result

    def write_status(self, conflicts: Collection[str]) -> int:
        """Write every overlay's conditions that changed; how many were patched."""
        assert self.kube is not None
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        with self._lock:
            objects = dict(self._objects)
        written = 0
        for name, (ok, reason, message) in self.verdicts(conflicts).items():
            obj = objects[name][0]
            generation = _meta(obj).get("generation")
            generation = generation if isinstance(generation, int) else 0
            wanted = [
                condition(kind, ok, reason, message, now, generation)
                for kind in (READY, VALIDATION_SUCCEEDED)
            ]
            old = {c.get("type"): c for c in _conditions(obj)}
            if all(_same(old.get(c["type"]), c) for c in wanted):
                continue
            for cond in wanted:
                prior = old.get(cond["type"])
                if prior and prior.get("status") == cond["status"] and prior.get("lastTransitionTime"):
                    cond["lastTransitionTime"] = prior["lastTransitionTime"]
            try:
                patch_status(self.kube, name, wanted)
                written += 1
            except ClusterError as err:  # status is informational; the next change writes it
                log.debug("Failed to update status of nodeoverlay %s, %s", name, err)
        return written


def _conditions(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    status = obj.get("status")
    found = status.get("conditions") if isinstance(status, Mapping) else None
    return [c for c in found if isinstance(c, Mapping)] if isinstance(found, list) else []


def _same(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    keys = ("status", "reason", "message", "observedGeneration")
    return old is not None and all(old.get(k) == new[k] for k in keys)


def patch_status(kube: client.ApiClient, name: str, conditions: list[dict[str, Any]]) -> None:
    with translated(f"patching status of nodeoverlay {name}"):
        client.CustomObjectsApi(kube).patch_cluster_custom_object_status(
            no.GROUP,
            no.VERSION,
            PLURAL,
            name,
            {"status": {"conditions": conditions}},
            _content_type="application/merge-patch+json",
        )
