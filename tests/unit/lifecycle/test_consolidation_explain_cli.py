"""`karpy explain node NAME --existing FILE`: the blockers and the best move, offline on the same
files as `karpy plan --existing FILE --consolidate`."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from extender.cli.consolidation import last_pod_starts
from extender.cli.main import main
from tests.unit.scheduling.builders import DATA

from .test_consolidation_cli import PROVISIONER, cli_node, cli_pod


def argv(tmp_path: Path, docs: list[dict[str, Any]], *extra: str) -> list[str]:
    (tmp_path / "existing.yaml").write_text(yaml.safe_dump_all(docs))
    (tmp_path / "prov.yaml").write_text(PROVISIONER)
    files = ["--existing", str(tmp_path / "existing.yaml"), "--provisioner", str(tmp_path / "prov.yaml")]
    return ["explain", "node", *extra, *files, "--instance-types", str(DATA / "instance-types.json")]


def explain(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], docs: list[dict[str, Any]], *extra: str
) -> str:
    assert main(argv(tmp_path, docs, *extra)) == 0
    return capsys.readouterr().out


def pdb(allowed: int) -> dict[str, Any]:
    return {
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "guard", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "guarded"}}},
        "status": {"disruptionsAllowed": allowed},
    }


def cluster() -> list[dict[str, Any]]:
    guarded = cli_pod("g", node_name="light", cpu="500m", labels={"app": "guarded"})
    return [cli_node("busy"), cli_node("light"), cli_pod("a", node_name="busy", cpu="2"), guarded]


def test_a_pdb_blocker_and_the_move_it_holds_back(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = explain(tmp_path, capsys, [*cluster(), pdb(0)], "light")
    assert "Node light (default):" in out
    assert "- pdb default/guard prevents pod evictions (it allows 0 disruptions)" in out
    assert "best move for it alone: delete, saving $0.192/h" in out and "1 pod(s) evicted; worth it" in out


def test_json_and_a_node_consolidation_takes_now(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = json.loads(explain(tmp_path, capsys, [*cluster(), pdb(1)], "light", "-o", "json"))
    assert out["blockers"] == [] and out["consolidating"].startswith("Consolidating")
    assert out["bestMove"]["kind"] == "delete" and out["bestMove"]["worthIt"] is True


def test_an_unknown_node_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv(tmp_path, cluster(), "ghost")) == 2
    assert capsys.readouterr().err.strip() == "karpy explain: node ghost not found"


def test_a_nodes_last_pod_event_is_its_newest_pods_start() -> None:
    """What `karpy explain node` counts consolidateAfter from: a snapshot shows when each pod
    started (else was created), not the pods deleted since."""
    older = {"spec": {"nodeName": "n"}, "status": {"startTime": "2026-01-01T00:00:00Z"}}
    newer = {
        "spec": {"nodeName": "n"},
        "status": {},
        "metadata": {"creationTimestamp": "2026-01-01T00:05:00Z"},
    }
    pending = {"spec": {}, "status": {"startTime": "2026-01-01T01:00:00Z"}}
    found = last_pod_starts([older, newer, pending])
    assert found == {"n": datetime(2026, 1, 1, 0, 5, tzinfo=UTC)}


def test_the_minimum_node_age_is_the_controllers_setting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI read LifecycleSettings' default (60 s) whatever KARPY_LIFECYCLE_* said, so live it
    called a node young that the controller was already consolidating."""
    monkeypatch.setenv("KARPY_LIFECYCLE_CONSOLIDATION_MIN_NODE_AGE_SECONDS", "1e12")
    out = json.loads(explain(tmp_path, capsys, [*cluster(), pdb(1)], "light", "-o", "json"))
    assert [b for b in out["blockers"] if "younger than 1e+12s" in b], out["blockers"]
