"""NodeClaim writes (`karpenter.sh/v1`): the record of each node karpy launches for a NodePool.

Created right after CreateFleet returned the instance (before its Node, so the lifecycle finds it
when the Node appears), kept current by the lifecycle through the status subresource, deleted when
the node's termination finishes, and garbage-collected when its node and instance are both gone.
`extender/api/nodeclaim.py` builds what is written here. Each claim carries the
`karpenter.sh/termination` finalizer, lifted (`release`) only once its node and instance are gone.

A record must never fail or hold up the node it records: the launch and termination verbs log an
API error and carry on; the lifecycle's `Tracker.sync` writes whatever they missed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kubernetes import client

from extender.api import nodeclaim as nc
from extender.api.labels import TERMINATION_FINALIZER
from extender.api.node import Node
from extender.api.provisioner import Provisioner, Taint
from extender.api.resources import Resources
from extender.cluster.errors import AlreadyExists, ClusterError, Conflict, NotFound, translated
from extender.cluster.nodes import instance_id

log = logging.getLogger("karpy.nodeclaims")

PLURAL = "nodeclaims"


def _api(kube: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(kube)


def read(kube: client.ApiClient, name: str) -> dict[str, Any] | None:
    try:
        with translated(f"reading nodeclaim {name}"):
            return dict(_api(kube).get_cluster_custom_object(nc.GROUP, nc.VERSION, PLURAL, name))
    except NotFound:
        return None


def create(kube: client.ApiClient, manifest: Mapping[str, Any], status: Mapping[str, Any]) -> dict[str, Any]:
    """Create the claim, then write its status (the API server drops `status` on create); the
    claim as written. An existing claim (a retried launch) gets the status written over it."""
    name = manifest["metadata"]["name"]
    try:
        with translated(f"creating nodeclaim {name}"):
            created = dict(
                _api(kube).create_cluster_custom_object(nc.GROUP, nc.VERSION, PLURAL, dict(manifest))
            )
    except AlreadyExists:
        created = read(kube, name) or {}
    version = (created.get("metadata") or {}).get("resourceVersion")
    return patch_status(kube, name, status, resource_version=version)


def patch_status(
    kube: client.ApiClient, name: str, status: Mapping[str, Any], *, resource_version: str | None = None
) -> dict[str, Any]:
    """Merge-patch `status` through the status subresource; with `resource_version`, only over that
    version of the claim (Conflict otherwise), since a merge patch replaces the conditions list."""
    body: dict[str, Any] = {"status": dict(status)}
    if resource_version:
        body["metadata"] = {"resourceVersion": resource_version}
    with translated(f"patching status of nodeclaim {name}"):
        return dict(
            _api(kube).patch_cluster_custom_object_status(
                nc.GROUP, nc.VERSION, PLURAL, name, body, _content_type="application/merge-patch+json"
            )
        )


def delete(kube: client.ApiClient, name: str) -> bool:
    """Delete the claim; False when it was not there (or the CRD is not installed)."""
    try:
        with translated(f"deleting nodeclaim {name}"):
            _api(kube).delete_cluster_custom_object(nc.GROUP, nc.VERSION, PLURAL, name)
    except NotFound:
        return False
    return True


#: Attempts at a finalizer change that keep meeting a newer version of the claim.
FINALIZER_ATTEMPTS = 3


def _set_finalizer(kube: client.ApiClient, name: str, present: bool) -> dict[str, Any] | None:
    """Add (`present`) or lift karpy's finalizer, over the version read (a merge patch replaces the
    list, so a finalizer someone else added meanwhile would be lost); the claim as left, None when
    it is gone. Adding skips a claim being deleted: the API server refuses a new finalizer then."""
    for attempt in range(FINALIZER_ATTEMPTS):
        claim = read(kube, name)
        if claim is None:
            return None
        meta = claim.get("metadata") or {}
        old = list(meta.get("finalizers") or ())
        if (TERMINATION_FINALIZER in old) == present or (present and meta.get("deletionTimestamp")):
            return claim
        new = [*old, TERMINATION_FINALIZER] if present else [f for f in old if f != TERMINATION_FINALIZER]
        body = {"metadata": {"finalizers": new, "resourceVersion": meta.get("resourceVersion")}}
        try:
            with translated(f"{'adding' if present else 'removing'} the finalizer of nodeclaim {name}"):
                return dict(
                    _api(kube).patch_cluster_custom_object(
                        nc.GROUP, nc.VERSION, PLURAL, name, body, _content_type="application/merge-patch+json"
                    )
                )
        except NotFound:
            return None
        except Conflict:
            if attempt == FINALIZER_ATTEMPTS - 1:
                raise
    return None


def release(kube: client.ApiClient, name: str) -> bool:
    """Lift karpy's finalizer (its node and instance are gone); False when the claim is gone."""
    return _set_finalizer(kube, name, present=False) is not None


def remove(kube: client.ApiClient, name: str) -> bool:
    """Delete the claim and lift its finalizer, so it goes at once; False when it was not there."""
    deleted = delete(kube, name)
    return release(kube, name) or deleted


def list_claims(kube: client.ApiClient) -> list[dict[str, Any]]:
    """Every NodeClaim; none when the CRD is not installed."""
    try:
        with translated("listing nodeclaims"):
            raw = _api(kube).list_cluster_custom_object(nc.GROUP, nc.VERSION, PLURAL)
    except NotFound:
        return []
    return list(raw.get("items") or [])


def lister(kube: client.ApiClient) -> Callable[..., Any]:
    """The NodeClaim list call, for an informer (`cluster/informer.py`) to list and watch with."""

    def list_nodeclaims(**kwargs: Any) -> Any:
        return _api(kube).list_cluster_custom_object(nc.GROUP, nc.VERSION, PLURAL, **kwargs)

    return list_nodeclaims


def name_of(node: Node, nodepool: str | None = None) -> str | None:
    """The claim name of `node` (its NodePool: `nodepool`, or the owner its labels name)."""
    owner = nodepool or node.labels.get(nc.NODEPOOL_LABEL) or node.provisioner
    iid = instance_id(node.provider_id)
    return nc.claim_name(owner, iid) if owner and iid else None


# -- the hooks -------------------------------------------------------------------------------------


def record_launch(
    kube: client.ApiClient, provisioner: Provisioner, node: Node, *, requests: Resources, now: datetime
) -> str | None:
    """Provisioning's hook: the claim of a node just launched for a NodePool (Launched=True); its
    name, None when the Provisioner is not a NodePool or the write failed (logged)."""
    iid = instance_id(node.provider_id)
    if not provisioner.records_nodeclaims or iid is None:
        return None
    manifest = nc.manifest(provisioner, node, iid, requests=requests)
    name: str = manifest["metadata"]["name"]
    try:
        create(kube, manifest, nc.launch_status(node, nc.launched(now=now)))
    except ClusterError as err:
        log.warning("Recording nodeclaim %s of node %s, %s", name, node.name, err)
        return None
    log.info("Created nodeclaim %s for node %s", name, node.name)
    return name


def delete_for_node(kube: client.ApiClient, node: Node) -> None:
    """Termination's hook: the node's instance is gone, so is its claim (if it has one): deleted
    and its finalizer lifted. An API error is logged; garbage collection removes the claim later."""
    name = name_of(node)
    if name is None:
        return
    try:
        if remove(kube, name):
            log.info("Deleted nodeclaim %s of node %s", name, node.name)
    except ClusterError as err:
        log.warning("Deleting nodeclaim %s of node %s, %s", name, node.name, err)


@dataclass(frozen=True)
class _Written:
    """What the tracker last wrote to (or read from) a claim."""

    resource_version: str
    generation: int
    status: Mapping[str, Any]
    requests: Resources
    startup_taints: tuple[Taint, ...]


#: `sync(drifted=KEEP)`: leave the condition as it is.
KEEP = object()


class Tracker:
    """The lifecycle's side: keeps each NodePool node's claim status current (Registered,
    Initialized, Drifted, Consolidatable), writing only what changed. Remembers what it wrote, so a
    node looked at again costs no API call; thread-safe (the node workers share one)."""

    def __init__(self, kube: client.ApiClient, clock: Callable[[], datetime]) -> None:
        self.kube = kube
        self.clock = clock
        self._lock = threading.Lock()
        self._written: dict[str, _Written] = {}

    def sync(
        self,
        node: Node,
        provisioner: Provisioner | None,
        *,
        drifted: object = KEEP,
        consolidatable: object = KEEP,
    ) -> None:
        """Bring the claim of `node` up to date; `drifted`: the drift reason (None = not drifted),
        `consolidatable`: True/False (set plainly / removed), or a `Consolidatable` nc.Condition
        (consolidation's verdict, with its reason and message); KEEP leaves either as written."""
        if provisioner is None or not provisioner.records_nodeclaims:
            return
        name = name_of(node, provisioner.name)
        if name is None:
            return
        try:
            self._sync(name, node, provisioner, drifted, consolidatable)
        except (Conflict, NotFound):
            self.forget(name)  # written meanwhile by someone else, or deleted: read afresh next time
        except ClusterError as err:
            log.warning("Updating nodeclaim %s of node %s, %s", name, node.name, err)
            self.forget(name)

    def _sync(
        self, name: str, node: Node, prov: Provisioner, drifted: object, consolidatable: object
    ) -> None:
        with self._lock:
            written = self._written.get(name)
        if written is None:
            written = self._load(name, node, prov)
        now = self.clock()
        gen = written.generation
        conditions = tuple(nc.Condition.from_manifest(c) for c in written.status.get("conditions") or ())
        if nc.get(conditions, nc.LAUNCHED) is None:  # the launch's own status write was lost
            conditions = nc.set_condition(conditions, nc.LAUNCHED, nc.TRUE, now=now, generation=gen)
        conditions = nc.lifecycle(
            conditions,
            node,
            startup_taints=written.startup_taints,
            requests=written.requests,
            now=now,
            generation=gen,
        )
        if isinstance(drifted, str):
            conditions = nc.set_condition(
                conditions, nc.DRIFTED, nc.TRUE, drifted, drifted, now=now, generation=gen
            )
        elif drifted is None:
            conditions = nc.clear_condition(conditions, nc.DRIFTED, now=now, generation=gen)
        if consolidatable is True:
            conditions = nc.set_condition(conditions, nc.CONSOLIDATABLE, nc.TRUE, now=now, generation=gen)
        elif consolidatable is False:
            conditions = nc.clear_condition(conditions, nc.CONSOLIDATABLE, now=now, generation=gen)
        elif isinstance(consolidatable, nc.Condition):
            c = consolidatable
            conditions = nc.set_condition(
                conditions, nc.CONSOLIDATABLE, c.status, c.reason, c.message, now=now, generation=gen
            )
        status = nc.launch_status(node, conditions)
        if status == written.status:
            return
        patched = patch_status(self.kube, name, status, resource_version=written.resource_version)
        self._remember(name, patched)
        for change in _transitions(written.status, status):
            log.info("Nodeclaim %s of node %s: %s", name, node.name, change)

    def condition(self, node: Node, provisioner: Provisioner | None, type_: str) -> nc.Condition | None:
        """The condition `type_` on the claim of `node` as last written or read (the claim is read
        once if this tracker has not seen it); None without a claim or when it cannot be read."""
        if provisioner is None or not provisioner.records_nodeclaims:
            return None
        name = name_of(node, provisioner.name)
        if name is None:
            return None
        with self._lock:
            written = self._written.get(name)
        try:
            written = written or self._load(name, node, provisioner)
        except ClusterError as err:
            log.warning("Reading nodeclaim %s of node %s, %s", name, node.name, err)
            return None
        return nc.get(nc.conditions_of({"status": written.status}), type_)

    def _load(self, name: str, node: Node, prov: Provisioner) -> _Written:
        # A claim written before claims carried the finalizer (an upgrade) gets it here.
        claim = _set_finalizer(self.kube, name, present=True)
        if claim is None:
            # Its launch could not record it, or the instance was adopted after a crash: record it now.
            iid = instance_id(node.provider_id) or ""
            manifest = nc.manifest(prov, node, iid, requests=Resources())
            claim = create(self.kube, manifest, nc.launch_status(node, nc.launched(now=self.clock())))
            log.info("Created nodeclaim %s for node %s", name, node.name)
        return self._remember(name, claim)

    def _remember(self, name: str, claim: Mapping[str, Any]) -> _Written:
        meta = claim.get("metadata") or {}
        written = _Written(
            resource_version=str(meta.get("resourceVersion") or ""),
            generation=int(meta.get("generation") or 1),
            status=dict(claim.get("status") or {}),
            requests=Resources.parse(((claim.get("spec") or {}).get("resources") or {}).get("requests")),
            startup_taints=nc.spec_taints(claim, "startupTaints"),
        )
        with self._lock:
            self._written[name] = written
        return written

    def forget(self, name: str) -> None:
        with self._lock:
            self._written.pop(name, None)

    def forget_node(self, node_name: str) -> None:
        """The node is gone: drop what was remembered of its claim."""
        with self._lock:
            for name in [n for n, w in self._written.items() if w.status.get("nodeName") == node_name]:
                del self._written[name]


def _transitions(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """`Type: Old -> New` for each condition whose status changed (Ready left out), for the log."""
    old = {c.get("type"): c.get("status") for c in before.get("conditions") or ()}
    new = {c.get("type"): c.get("status") for c in after.get("conditions") or ()}
    return [
        f"{kind}: {old.get(kind, 'None')} -> {new.get(kind, 'None')}"
        for kind in sorted(old.keys() | new.keys())
        if kind != nc.READY and old.get(kind) != new.get(kind)
    ]
