"""The local cluster's KubeSchedulerConfiguration: the defaults every test runs with, and the knobs
benchmarks/schedpath.py turns (extender off, no prioritize verb, client QPS lifted)."""

from __future__ import annotations

from pathlib import Path

from hack.localcluster.cluster import _scheduler_config

KUBECONFIG = Path("/run/scheduler.kubeconfig")
URL = "http://127.0.0.1:8088/"


def test_the_default_registers_filter_and_prioritize_at_kube_schedulers_own_client_rate() -> None:
    config = _scheduler_config(KUBECONFIG, URL, None)
    assert config["clientConnection"] == {"kubeconfig": str(KUBECONFIG)}
    (extender,) = config["extenders"]
    assert (extender["filterVerb"], extender["prioritizeVerb"], extender["weight"]) == (
        "filter",
        "prioritize",
        1,
    )


def test_benchmark_knobs_drop_the_extender_or_its_prioritize_verb_and_lift_the_client_rate() -> None:
    without = _scheduler_config(KUBECONFIG, URL, None, extender=False, client_qps=1000.0, client_burst=2000)
    assert "extenders" not in without
    assert without["clientConnection"] == {"kubeconfig": str(KUBECONFIG), "qps": 1000.0, "burst": 2000}
    (filter_only,) = _scheduler_config(KUBECONFIG, URL, None, prioritize=False)["extenders"]
    # A weight only scores through a prioritize verb (reference/protocols.md 1.4).
    assert "prioritizeVerb" not in filter_only and "weight" not in filter_only
