"""The chaos run, reduced (issue 13): 0 -> 100 -> 0 pods under two `karpy controller` replicas with
the API server faulted at 5 %, EC2 throttled at 10 % and SQS failing at 5 %, the leader SIGKILLed
mid-scale-up and interruption messages sent meanwhile. The scenario and its invariants are
hack/localcluster/chaos.py; benchmarks/chaos.py runs the full 500-pod version and prints figures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hack.localcluster import chaos

pytestmark = pytest.mark.integration


def test_no_duplicate_orphan_pending_pod_or_lost_message_under_faults_and_a_leader_kill(
    cluster: Any, provisioner_crd: str, tmp_path: Path
) -> None:
    config = chaos.Config(pods=100, deadline_seconds=240.0, work_dir=tmp_path)
    result = chaos.run(cluster.state, config, say=lambda _line: None)
    report = "\n".join(result.lines())
    assert not result.violations, report
    # The run proves something only if the faults and the failover really happened.
    # (~1,000 apiserver calls at 5 %; EC2's few dozen calls at 10 % may, rarely, draw no fault.)
    assert sum(v for k, v in result.faults.items() if k.startswith("apiserver")) >= 10, report
    assert "leader takeover seconds" in result.figures, report
    assert result.figures["interruption messages sent"] == 5, report
    assert result.figures["nodes created"] > 0, report
