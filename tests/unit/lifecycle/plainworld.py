"""A NodeWorker over plain data: nodes as API JSON in a dict, the node adapters it calls patched onto
it, so a reconcile runs whole (readiness, finalizer, expiry, drift, emptiness, termination) without
an API server. What it writes is kept (annotations set, nodes deleted, finalizers removed)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import pytest

from extender.api import labels
from extender.api.node import Node
from extender.api.provisioner import Provisioner
from extender.cloud.fake import FakeCloudProvider
from extender.lifecycle import expiry, nodepatch, termination
from extender.lifecycle.context import Context
from extender.lifecycle.events import Recorder
from extender.lifecycle.nodes import NodeWorker
from extender.settings import Settings
from tests.builders import T0
from tests.unit.scheduling.builders import catalog


class NoClaims:
    """The NodeClaim writes are the claims tracker's concern (its own tests): not recorded here."""

    def sync(self, *_args: Any, **_kwargs: Any) -> None:
        pass

    def forget_node(self, _name: str) -> None:
        pass


class PlainWorld:
    def __init__(self, monkeypatch: pytest.MonkeyPatch, pools: Mapping[str, Provisioner]) -> None:
        self.manifests: dict[str, dict[str, Any]] = {}
        self.annotations: list[tuple[str, str, str | None]] = []
        self.deleted: list[str] = []
        self.released: list[str] = []
        self.now: datetime = T0
        self.pools = dict(pools)
        m = monkeypatch
        m.setattr(nodepatch, "get_node", self._get)
        m.setattr(nodepatch, "pods_on_node", lambda _kube, _name: [])
        m.setattr(nodepatch, "ensure_finalizer", lambda _kube, _node, _f: False)
        m.setattr(nodepatch, "set_annotation", lambda _k, n, key, v: self.annotations.append((n, key, v)))
        m.setattr(nodepatch, "delete_node", lambda _kube, name: self.deleted.append(name))
        m.setattr(nodepatch, "remove_taint", lambda *_a: None)
        m.setattr(nodepatch, "remove_finalizer", lambda _k, node, _f: self.released.append(node.name))
        m.setattr(expiry, "cordon", lambda _kube, _name: True)
        m.setattr(termination, "cordon", lambda _kube, _name: True)
        m.setattr(termination.nodeclaims, "delete_for_node", lambda _kube, _node: None)
        self.ctx = Context(
            settings=Settings(),
            kube=None,
            cloud=FakeCloudProvider(catalog=catalog()),
            state=None,
            provisioning=None,
            recorder=Recorder(None),
            clock=lambda: self.now,
        )
        self.worker = NodeWorker(self.ctx, self.lookup)
        self.worker.__dict__["claims"] = NoClaims()

    def lookup(self, name: str | None) -> Provisioner | None:
        return self.pools.get(name or "")

    def _get(self, _kube: Any, name: str) -> Node | None:
        manifest = self.manifests.get(name)
        return None if manifest is None else Node.from_live(manifest)

    def add(self, manifest: dict[str, Any]) -> str:
        name: str = manifest["metadata"]["name"]
        manifest["metadata"].setdefault("finalizers", [labels.TERMINATION_FINALIZER])
        self.manifests[name] = manifest
        self.worker.on_node("ADDED", manifest)
        return name

    def reconcile_all(self) -> None:
        for name in list(self.manifests):
            self.worker.process(name)
