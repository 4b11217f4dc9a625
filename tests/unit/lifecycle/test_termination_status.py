"""After a node's finalizer goes, the termination path refreshes the status of the v1alpha5
Provisioner that launched it; a NodePool's node refreshes nothing there (its status is v1's, written
by the v1 status pass, cluster/v1status.py), so no patch is sent to a Provisioner of its name."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pytest

from extender.api import labels
from extender.api.node import Node
from extender.cloud.fake import FakeCloudProvider
from extender.lifecycle import termination
from extender.lifecycle.context import Context
from extender.lifecycle.events import Recorder
from extender.settings import Settings
from tests.builders import T0, node_manifest
from tests.unit.scheduling.builders import catalog


class StatusRefreshes:
    """The provisioning controller's part the termination path calls, recording refreshes."""

    def __init__(self) -> None:
        self.refreshed: list[str] = []

    def refresh_status(self, provisioner_names: Iterable[str]) -> None:
        self.refreshed.extend(provisioner_names)

    def provision_replacements(self, pods: Sequence[Any]) -> list[str]:
        return []

    def adopt_instances(self) -> list[str]:
        return []


def finalized(owner_label: str) -> Node:
    manifest = node_manifest("n1", provisioner=None, deleting=True)
    manifest["metadata"]["labels"][owner_label] = "team"
    manifest["metadata"]["finalizers"] = [labels.TERMINATION_FINALIZER]
    return Node.from_live(manifest)


@pytest.mark.parametrize(
    ("owner_label", "refreshed"), [(labels.PROVISIONER_NAME, ["team"]), (labels.NODEPOOL, [])]
)
def test_termination_refreshes_only_a_provisioners_status(
    monkeypatch: pytest.MonkeyPatch, owner_label: str, refreshed: list[str]
) -> None:
    removed: list[str] = []
    monkeypatch.setattr(termination.nodepatch, "pods_on_node", lambda kube, name: [])
    monkeypatch.setattr(termination, "cordon", lambda kube, name: True)
    monkeypatch.setattr(termination.nodeclaims, "delete_for_node", lambda kube, node: None)
    monkeypatch.setattr(
        termination.nodepatch, "remove_finalizer", lambda kube, node, finalizer: removed.append(node.name)
    )
    status = StatusRefreshes()
    ctx = Context(
        settings=Settings(),
        kube=None,
        cloud=FakeCloudProvider(catalog=catalog()),
        state=None,
        provisioning=status,
        recorder=Recorder(None),
        clock=lambda: T0,
    )
    assert termination.Terminator().reconcile(ctx, finalized(owner_label)) is termination.Step.DONE
    assert removed == ["n1"]
    assert status.refreshed == refreshed
