"""The local cluster's KubeSchedulerConfiguration: the defaults every test runs with (the shipped
config's extender entry), and the knobs benchmarks/schedpath.py turns (extender off, called for
every pod with its prioritize verb, client QPS lifted)."""

from __future__ import annotations

from pathlib import Path

import yaml

from extender.api import labels
from hack.localcluster.cluster import GUARDED_RESOURCE, _scheduler_config

KUBECONFIG = Path("/run/scheduler.kubeconfig")
URL = "http://127.0.0.1:8088/"
MANIFEST = Path(__file__).parents[2] / "manifests" / "scheduler" / "config.yaml"


def test_the_default_is_the_shipped_filter_called_only_for_guarded_pods_at_kube_schedulers_own_rate() -> None:
    config = _scheduler_config(KUBECONFIG, URL, None)
    assert config["clientConnection"] == {"kubeconfig": str(KUBECONFIG)}
    (extender,) = config["extenders"]
    assert extender["filterVerb"] == "filter" and "prioritizeVerb" not in extender
    assert extender["managedResources"] == [{"name": labels.GUARDED_RESOURCE, "ignoredByScheduler": True}]
    assert GUARDED_RESOURCE == labels.GUARDED_RESOURCE
    (configmap,) = yaml.safe_load_all(MANIFEST.read_text())
    (shipped,) = yaml.safe_load(configmap["data"]["scheduler-config.yaml"])["extenders"]
    keys = ("filterVerb", "nodeCacheCapable", "ignorable", "managedResources")
    assert {k: shipped.get(k) for k in keys} == {k: extender.get(k) for k in keys}
    assert "prioritizeVerb" not in shipped


def test_benchmark_knobs_drop_the_extender_or_send_every_pod_and_lift_the_client_rate() -> None:
    without = _scheduler_config(KUBECONFIG, URL, None, extender=False, client_qps=1000.0, client_burst=2000)
    assert "extenders" not in without
    assert without["clientConnection"] == {"kubeconfig": str(KUBECONFIG), "qps": 1000.0, "burst": 2000}
    (every_pod,) = _scheduler_config(KUBECONFIG, URL, None, managed=False, prioritize=True)["extenders"]
    assert "managedResources" not in every_pod
    assert (every_pod["prioritizeVerb"], every_pod["weight"]) == ("prioritize", 1)
