"""Two local control planes starting at once (pytest-xdist's two workers) got the same extender port:
each checked 8088 before the other's components were up, so the other's claim looked stale, and both
kube-schedulers called 8088 (CI-like run: 29 errors "Address already in use"). A claim of a run still
starting (its claiming process alive) holds the port, and the check and the claim are taken under one
lock."""

from __future__ import annotations

from pathlib import Path

import pytest

from hack.localcluster import build, cluster


def test_a_cluster_still_starting_keeps_its_extender_port(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(build, "cache_root", lambda: tmp_path / "cache")
    monkeypatch.delenv("KARPY_EXTENDER_PORT", raising=False)
    first = cluster._extender_port(tmp_path / "gw0")  # no state.json yet: still starting
    second = cluster._extender_port(tmp_path / "gw1")
    assert first != second


def test_a_dead_runs_claim_is_dropped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(build, "cache_root", lambda: tmp_path / "cache")
    monkeypatch.delenv("KARPY_EXTENDER_PORT", raising=False)
    first = cluster._extender_port(tmp_path / "gone")
    claim = cluster._claim_path(tmp_path / "gone")
    claim.write_text(claim.read_text().replace(f'"pid": {__import__("os").getpid()}', '"pid": 0'))
    assert cluster._claimed_ports(tmp_path / "next") == set() and not claim.exists()
    assert first > 0
