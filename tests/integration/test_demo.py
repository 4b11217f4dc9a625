"""`make demo`, run the way make runs it, asserted on its JSON summary.

The demo brings up its own control plane and karpy processes in a temporary run folder, replays the
walkthrough and stops everything; the test then checks what it reported and that no process it
started (cluster components or karpy) is still alive. Here on the v1 API (`--api v1`); the v1alpha5
walkthrough runs once, from the image (tests/integration/test_image.py), with the same checks
(`assert_walkthrough`, `assert_nothing_left`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from hack.demo import crd_files
from hack.localcluster import procs

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
TTL = 30


def run_demo(run_dir: Path, summary_path: Path, *args: str) -> tuple[dict[str, Any], str]:
    """`python -m hack.demo` as make runs it, in `run_dir`; asserts it succeeded and returns its
    JSON summary and output."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "hack.demo",
            "--run-dir",
            str(run_dir),
            "--json-summary",
            str(summary_path),
            *args,
        ],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=900,
    )
    output = result.stdout + result.stderr
    assert summary_path.exists(), output[-4000:]
    summary = json.loads(summary_path.read_text())
    assert result.returncode == 0 and summary["ok"], f"{summary['problems']}\n{output[-4000:]}"
    return summary, output


def test_the_demo_applies_the_crds_the_chart_installs() -> None:
    """`helm install` applies every CRD the chart renders (--include-crds: its crds/ folder); the
    demo applies the same objects, from the same files (issue 32: it applied 4 of the 5, without
    nodeclaims.karpenter.sh, so a demo NodePool never got NodeClaims)."""
    from hack import helm

    chart_dir = str(ROOT / "charts" / "karpy")
    rendered = subprocess.run(
        [str(helm.binary()), "template", "karpy", chart_dir, "--include-crds", "--set", "clusterName=demo"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    chart = {
        d["metadata"]["name"]: d
        for d in yaml.safe_load_all(rendered)
        if d and d["kind"] == "CustomResourceDefinition"
    }
    demo = {
        d["metadata"]["name"]: d
        for path in crd_files("all")
        for d in yaml.safe_load_all(path.read_text())
        if d
    }
    assert sorted(demo) == sorted(chart)
    assert demo == chart


def assert_walkthrough(summary: dict[str, Any], output: str, api: str) -> None:
    """What every replay of the walkthrough shows, on either API (--ttl TTL): the same plans, nodes
    and TTL. test_image.py makes these checks on the v1alpha5 run (from the image), this file on v1."""
    # Scale-up: 5 pods bound; redeploy: 3 + 2 on two c5.xlarge nodes.
    assert summary["phases"]["scale_up"]["pods_bound"] == 5
    assert summary["ami_families"] == ["AL2023"]  # karpy's default amiFamily, and the demo says so
    redeploy = summary["phases"]["redeploy"]["nodes"].values()
    assert sorted(n["pods"] for n in redeploy) == [2, 3]
    assert {n["instance_type"] for n in redeploy} == {"c5.xlarge"}
    assert summary["pods_bound"] == 10
    assert summary["nodes_launched"] >= 2
    assert all(n["capacity_type"] == "spot" for n in summary["nodes"])
    # The owner label is the API's: karpenter.sh/nodepool for a NodePool's nodes.
    owner = "karpenter.sh/nodepool" if api == "v1" else "karpenter.sh/provisioner-name"
    assert {n["owner"] for n in summary["nodes"]} == {f"{owner}=default"}
    assert summary["price_per_hour_launched"] > 0

    # Every node karpy launched was terminated, each no sooner than the TTL after it emptied.
    assert summary["ttl_seconds"] == TTL
    assert summary["nodes_terminated"] == summary["nodes_launched"]
    assert len(summary["empty_to_deleted_seconds"]) == summary["nodes_launched"]
    assert all(TTL - 1 <= s <= TTL + 60 for s in summary["empty_to_deleted_seconds"])

    # karpy said so in its own words.
    lines = summary["karpy_log_lines"]
    assert lines["provisionable pod"] >= 2 and lines["Launched instance"] >= summary["nodes_launched"]
    assert lines["Bound"] >= 2 and lines["Deleted node"] >= summary["nodes_launched"]
    assert "Found" in output and "SUMMARY" in output and "pending -> bound" in output


def assert_nothing_left(summary: dict[str, Any], run_dir: Path) -> None:
    """No process the demo started is alive: karpy's (webhook, controller) and the cluster's."""
    started = [p["pid"] for p in summary["processes_started"]]
    cluster = json.loads((run_dir / "state.json").read_text())["processes"]
    assert {p["name"] for p in summary["processes_started"]} == {"karpy-webhook", "karpy-controller"}
    assert not [pid for pid in started if procs.pid_alive(pid)]
    assert not [n for n, p in cluster.items() if procs.is_same_process(p["pid"], p.get("ticks"))]


def test_demo_replays_the_walkthrough_on_a_nodepool_and_cleans_up(tmp_path: Path) -> None:
    """The walkthrough on a v1 NodePool + EC2NodeClass (consolidationPolicy WhenEmpty,
    consolidateAfter = the TTL), as `make demo` runs it: the demo stops everything itself. The
    v1alpha5 Provisioner's walkthrough is replayed from the image, in test_image.py, with the same
    checks (one demo process fewer in `make test`)."""
    run_dir = tmp_path / "run"
    summary, output = run_demo(run_dir, tmp_path / "summary.json", "--ttl", str(TTL), "--api", "v1")
    assert_walkthrough(summary, output, "v1")
    # Nothing left behind, by the demo's own count and by ours.
    assert summary["processes_left"] == []
    assert_nothing_left(summary, run_dir)
