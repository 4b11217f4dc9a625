"""The controller's warm-up (issue 26) on the fake apiserver and the in-memory cloud provider: what it
resolves before /readyz answers 200, and that a failing step neither blocks readiness nor the loop."""

from __future__ import annotations

import logging
import threading

import pytest

from extender.cloud.fake import FakeCloudProvider
from extender.cluster.boundpods import BoundPods
from extender.provisioning import warmup
from extender.provisioning.controller import ProvisioningController
from extender.scheduling import views
from extender.settings import Settings
from extender.state import ClusterState
from tests.unit.provisioning.fakes import Clock, FakeCluster
from tests.unit.scheduling.builders import catalog, make_provisioner


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    fake = FakeCluster(monkeypatch)
    fake.provisioners = [
        make_provisioner("default"),
        make_provisioner("tainted", taints=[{"key": "team", "value": "a", "effect": "NoSchedule"}]),
    ]
    return fake


def controller_for(cloud: FakeCloudProvider) -> ProvisioningController:
    return ProvisioningController(
        settings=Settings(),
        kube=None,  # type: ignore[arg-type]
        cloud=cloud,
        state=ClusterState(),
        bound=BoundPods(),
        clock=Clock(),
    )


def test_ready_once_informers_synced_and_each_provisioner_planned_and_prepared(cluster) -> None:
    cloud = FakeCloudProvider(catalog=catalog())
    controller = controller_for(cloud)
    ready = controller.warmup.readiness
    views.VIEWS.clear()
    stop = threading.Event()
    thread = threading.Thread(target=controller.warmup.run, args=(stop,))
    thread.start()
    try:
        # The pending-pod watch has listed, the node and bound-pod indexes not yet: not ready.
        controller.state.set_ready()
        assert not ready.done_event.wait(0.3) and ready.waiting() == list(warmup.STEPS)
        controller.nodes.synced.set()
        controller.bound.synced.set()
        assert ready.done_event.wait(10) and ready.waiting() == []
    finally:
        stop.set()
        thread.join(10)
    (prepare,) = [c for c in cloud.calls if c.verb == "prepare"]
    assert sorted(r.provisioner.name for r in prepare.args) == ["default", "tainted"]
    assert all(r.instance_types and r.count == 1 for r in prepare.args)
    assert "create" not in cloud.verbs()
    # The solver's views of the catalog the batches read are built and kept.
    assert {k.provisioner.name for k in views.VIEWS._kept} == {"default", "tainted"}


def test_a_failing_step_is_retried_then_left_to_the_first_batch(cluster, monkeypatch, caplog) -> None:
    monkeypatch.setattr(warmup, "BACKOFF_SECONDS", 0.0)
    cloud = FakeCloudProvider(catalog=catalog())
    cloud.fail_next("prepare", *[RuntimeError("RequestLimitExceeded")] * warmup.ATTEMPTS)
    controller = controller_for(cloud)
    controller.state.set_ready()
    controller.nodes.synced.set()
    controller.bound.synced.set()
    caplog.set_level(logging.INFO, logger="karpy")
    controller.warmup.run(threading.Event())
    assert controller.warmup.readiness.ready
    assert cloud.verbs().count("prepare") == warmup.ATTEMPTS
    (gave_up,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "Warming up launch failed, the first batch does it" in gave_up.getMessage()


def test_leadership_during_the_start_warm_up_leaves_it_the_work(cluster) -> None:
    """An informer that never syncs (API server down at start) must not hold up the loop's
    leadership start: `again` returns while the start's warm-up runs, and warms once it is done."""
    cloud = FakeCloudProvider(catalog=catalog())
    controller = controller_for(cloud)
    stop = threading.Event()
    thread = threading.Thread(target=controller.warmup.run, args=(stop,))
    thread.start()
    try:
        controller._on_started_leading()
        assert "prepare" not in cloud.verbs()
    finally:
        stop.set()
        thread.join(10)
    controller.warmup.readiness = warmup.Readiness(())
    controller._on_started_leading()
    assert cloud.verbs().count("prepare") == 1
