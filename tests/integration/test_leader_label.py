"""The extender Service reaches the leader only: on the real apiserver, the replica holding the Lease
labels its pod karpy.sh/leader=true (the Service's selector), and a replica that loses the Lease,
or restarts, clears the label."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from extender.cluster.leaderlabel import LEADER_LABEL
from extender.lifecycle.leader import LeaderElector
from extender.main import _leader_label
from extender.settings import LeaderElectionSettings, Settings
from tests.integration.helpers import wait_for

pytestmark = pytest.mark.integration

APP = {"app.kubernetes.io/name": "karpy-controller"}
#: The karpy-extender Service's selector (manifests/controller/service.yaml).
SELECTOR = "app.kubernetes.io/name=karpy-controller,karpy.sh/leader=true"


def replica_pod(core: Any, namespace: str, name: str, labels: dict[str, str]) -> None:
    core.create_namespaced_pod(
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": labels},
            # No scheduler serves this name, so the pod is never placed (nor provisioned for):
            # only its labels matter here.
            "spec": {
                "schedulerName": "karpy-test-nobody",
                "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
            },
        },
    )


def selected(core: Any, namespace: str) -> list[str]:
    return sorted(p.metadata.name for p in core.list_namespaced_pod(namespace, label_selector=SELECTOR).items)


def test_only_the_leaders_pod_is_selected_by_the_extender_service(
    cluster: Any, core_v1: Any, namespace: str
) -> None:
    # "b" restarted in a pod still labelled from an earlier leadership.
    replica_pod(core_v1, namespace, "replica-a", APP)
    replica_pod(core_v1, namespace, "replica-b", {**APP, LEADER_LABEL: "true"})
    stops = {name: threading.Event() for name in ("replica-a", "replica-b")}
    electors = {}
    with cluster.api_client() as kube:
        for name in ("replica-a", "replica-b"):
            le = LeaderElectionSettings(
                enabled=True,
                namespace=namespace,
                lease_name="karpy-controller",
                lease_duration_seconds=3,
                renew_deadline_seconds=2,
                retry_period_seconds=0.3,
                pod_name=name,
            )
            settings = Settings(leader_election=le)
            on_started, on_stopped = _leader_label(kube, settings)
            electors[name] = LeaderElector(
                kube=kube, settings=le, identity=name, on_started=on_started, on_stopped=on_stopped
            )
            if name == "replica-b":
                assert "replica-b" not in selected(core_v1, namespace), "a restart clears the old label"
            electors[name].start(stops[name])
            if name == "replica-a":
                wait_for(electors[name].is_leader, 10, "replica-a leads")
        assert wait_for(lambda: selected(core_v1, namespace) == ["replica-a"], 10, "replica-a labelled")
        assert not electors["replica-b"].is_leader()
        stops["replica-a"].set()  # graceful stop: the Lease is released and the label cleared
        wait_for(electors["replica-b"].is_leader, 10, "replica-b takes over")
        wait_for(lambda: selected(core_v1, namespace) == ["replica-b"], 10, "only replica-b labelled")
        stops["replica-b"].set()
        wait_for(lambda: selected(core_v1, namespace) == [], 10, "no replica labelled after both stopped")
