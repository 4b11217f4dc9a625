"""The lifecycle's unit tests run on plain data (kube=None): the disrupted taint that goes with a
removal mark (lifecycle/context.py) is kept here, node -> taint keys, instead of patched onto a
Node. tests/integration/test_disrupted_taint.py proves the patches on the local control plane."""

from __future__ import annotations

from typing import Any

import pytest

from extender.lifecycle import nodepatch


@pytest.fixture(autouse=True)
def node_taints(monkeypatch: pytest.MonkeyPatch) -> dict[str, set[str]]:
    taints: dict[str, set[str]] = {}

    def add(_kube: Any, name: str, taint: Any) -> bool:
        keys = taints.setdefault(name, set())
        added = taint.key not in keys
        keys.add(taint.key)
        return added

    def drop(_kube: Any, name: str, key: str) -> bool:
        keys = taints.get(name, set())
        had = key in keys
        keys.discard(key)
        return had

    monkeypatch.setattr(nodepatch, "add_taint", add)
    monkeypatch.setattr(nodepatch, "drop_taint", drop)
    return taints
