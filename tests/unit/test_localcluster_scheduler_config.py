"""The local cluster's KubeSchedulerConfiguration: the defaults every test runs with (the shipped
config's extender entry: filter and prioritize, for every pod), and the knobs benchmarks/schedpath.py
and the opt-in mode's tests turn (extender off, only `karpy.sh/guarded` pods, client QPS lifted)."""

from __future__ import annotations

from pathlib import Path

import yaml

from extender.api import labels
from hack.localcluster.cluster import GUARDED_RESOURCE, _scheduler_config

KUBECONFIG = Path("/run/scheduler.kubeconfig")
URL = "http://127.0.0.1:8088/"
MANIFEST = Path(__file__).parents[2] / "manifests" / "scheduler" / "config.yaml"


def test_the_default_is_the_shipped_extender_called_for_every_pod_at_kube_schedulers_own_rate() -> None:
    config = _scheduler_config(KUBECONFIG, URL, None)
    assert config["clientConnection"] == {"kubeconfig": str(KUBECONFIG)}
    (extender,) = config["extenders"]
    assert (extender["filterVerb"], extender["prioritizeVerb"]) == ("filter", "prioritize")
    assert "managedResources" not in extender
    (configmap,) = yaml.safe_load_all(MANIFEST.read_text())
    (shipped,) = yaml.safe_load(configmap["data"]["scheduler-config.yaml"])["extenders"]
    keys = ("filterVerb", "prioritizeVerb", "weight", "nodeCacheCapable", "ignorable", "managedResources")
    assert {k: shipped.get(k) for k in keys} == {k: extender.get(k) for k in keys}


def test_knobs_drop_the_extender_send_only_guarded_pods_and_lift_the_client_rate() -> None:
    without = _scheduler_config(KUBECONFIG, URL, None, extender=False, client_qps=1000.0, client_burst=2000)
    assert "extenders" not in without
    assert without["clientConnection"] == {"kubeconfig": str(KUBECONFIG), "qps": 1000.0, "burst": 2000}
    (guarded,) = _scheduler_config(KUBECONFIG, URL, None, managed=True, prioritize=False)["extenders"]
    assert guarded["managedResources"] == [{"name": labels.GUARDED_RESOURCE, "ignoredByScheduler": True}]
    assert GUARDED_RESOURCE == labels.GUARDED_RESOURCE and "prioritizeVerb" not in guarded
