"""Two local control planes starting at once (pytest-xdist's two workers) got the same extender port:
each checked 8088 before the other's components were up, so the other's claim looked stale, and both
kube-schedulers called 8088 (CI-like run: 29 errors "Address already in use"). A claim of a run still
starting (its claiming process alive) holds the port, and the check and the claim are taken under one
lock.

Then one cluster's kube-apiserver found its port taken (CI, stop 43: "kube-apiserver: port 59689 on
127.0.0.1 is already in use", 29 errors): ports picked by bind(0) lie in the kernel's ephemeral range,
where an outgoing connection (to etcd, to moto) may take one as its source port before the server
starts. The components' ports are now picked outside that range and claimed with the extender's."""

from __future__ import annotations

from pathlib import Path

import pytest

from hack.localcluster import build, cluster, procs

NAMES = ("etcd", "etcd-peer", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")


def test_a_cluster_still_starting_keeps_its_extender_port(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(build, "cache_root", lambda: tmp_path / "cache")
    monkeypatch.delenv("KARPY_EXTENDER_PORT", raising=False)
    first = cluster._claim_ports(tmp_path / "gw0", NAMES)  # no state.json yet: still starting
    second = cluster._claim_ports(tmp_path / "gw1", NAMES)
    assert first[0] != second[0]
    assert not {first[0], *first[1].values()} & {second[0], *second[1].values()}


def test_a_dead_runs_claim_is_dropped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(build, "cache_root", lambda: tmp_path / "cache")
    monkeypatch.delenv("KARPY_EXTENDER_PORT", raising=False)
    first, _ = cluster._claim_ports(tmp_path / "gone", NAMES)
    claim = cluster._claim_path(tmp_path / "gone")
    claim.write_text(claim.read_text().replace(f'"pid": {__import__("os").getpid()}', '"pid": 0'))
    assert cluster._claimed_ports(tmp_path / "next") == set() and not claim.exists()
    assert first > 0


def test_the_components_ports_lie_outside_the_kernels_ephemeral_range(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(build, "cache_root", lambda: tmp_path / "cache")
    low, high = procs.ephemeral_range()
    for run in range(5):
        _, ports = cluster._claim_ports(tmp_path / f"run{run}", NAMES)
        assert len(set(ports.values())) == len(NAMES)
        assert not [p for p in ports.values() if low <= p <= high], (ports, low, high)
    assert not low <= procs.free_port() <= high


def test_a_kernel_whose_ephemeral_range_is_nearly_everything_still_gets_ports(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(procs, "ephemeral_range", lambda: (1024, 65535))
    ports = procs.free_ports(3)
    assert len(set(ports)) == 3 and all(p >= 10000 for p in ports)
