"""Issue 31: a launch that cannot become a Node, or that EC2 refuses for good, backs its pool off.

Before: a NodePool whose template carried a 1 MB annotation had its instance launched, the Node
create refused (422 `metadata.annotations: Too long`), and the next batch launched again (3
instances for one pod); an EC2NodeClass with 60 tags failed every launch (TagLimitExceeded, 12
times). Karpenter marks such a NodeClaim `Launched=False` (`LaunchFailed`) and backs it off
exponentially (kubernetes-sigs/karpenter pkg/controllers/nodeclaim/lifecycle/launch.go); its
NodePool carries `NodeRegistrationHealthy=False`. Here the pool holds the backoff.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from extender.api import labels as wk
from extender.cloud.fake import FakeCloudProvider
from extender.cloud.types import CloudError
from extender.cluster import nodes as kube_nodes
from extender.cluster import v1status
from extender.cluster.errors import Invalid, Unavailable
from extender.provisioning import backoff, register
from extender.provisioning.backoff import LaunchBackoff, permanent_cloud_error, permanent_cluster_error
from tests.unit.provisioning.fakes import Clock, FakeCluster, pending_pod
from tests.unit.provisioning.test_controller import controller_for, run
from tests.unit.scheduling.builders import catalog, make_provisioner

TOO_LONG = Invalid(
    'creating node n: 422 Node "n" is invalid: metadata.annotations: Too long: must have at most '
    "262144 bytes",
    status=422,
    reason="Invalid",
)


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    cluster = FakeCluster(monkeypatch)
    cluster.provisioners = [
        replace(make_provisioner("broken"), kind="NodePool", annotations={"big": "x" * 1_000_000}),
        replace(make_provisioner("plain"), kind="NodePool"),
    ]
    cluster.conditions: list[tuple[str, bool, str]] = []  # type: ignore[misc]
    monkeypatch.setattr(
        v1status,
        "set_condition",
        lambda _k, name, ok, reason, _m: cluster.conditions.append((name, ok, reason)),
    )
    refuse_big = cluster.create_node

    def create_node(kube: Any, manifest: dict[str, Any]) -> bool:
        if manifest["metadata"].get("annotations", {}).get("big"):
            raise TOO_LONG
        return refuse_big(kube, manifest)

    monkeypatch.setattr(kube_nodes, "create_node", create_node)
    cluster.claims_deleted: list[str] = []  # type: ignore[misc]
    monkeypatch.setattr(register.nodeclaims, "record_launch", lambda *_a, **_kw: None)
    monkeypatch.setattr(
        register.nodeclaims, "delete_for_node", lambda _k, node: cluster.claims_deleted.append(node.name)
    )
    return cluster


@pytest.fixture
def cloud() -> FakeCloudProvider:
    return FakeCloudProvider(catalog=catalog())


def for_pool(name: str, pool: str) -> dict[str, Any]:
    return pending_pod(name, nodeSelector={wk.NODEPOOL: pool})


def test_a_node_the_apiserver_refuses_terminates_its_instance_and_backs_the_pool_off(cluster, cloud) -> None:
    clock = Clock()
    controller = controller_for(cloud, clock=clock)
    key = cluster.add_pod(for_pool("web", "broken"))
    run(controller, [key])
    (launched,) = [c.args[0] for c in cloud.calls if c.verb == "delete"]
    assert cloud.instances[launched].state == "terminated"
    assert not cluster.nodes and key in controller.parked
    assert len(cluster.claims_deleted) == 1  # its NodeClaim goes with it
    # One Event on the NodePool, one on the pod, the pool's condition False.
    pool_events = [e for e in cluster.events if e["kind"] == "NodePool"]
    assert [(e["name"], e["reason"]) for e in pool_events] == [("broken", "LaunchFailed")]
    assert "Too long" in pool_events[0]["message"]
    assert [e["reason"] for e in cluster.events if e["kind"] == "Pod"] == ["LaunchFailed"]
    assert cluster.conditions == [("broken", False, "LaunchFailed")]
    # The next batches within the backoff launch nothing for the pod, and say so once.
    for _ in range(3):
        clock.now += 10
        run(controller, [key])
    assert cloud.verbs().count("create") == 1
    assert [e["reason"] for e in cluster.events if e["kind"] == "Pod"] == ["LaunchFailed", "LaunchFailed"], [
        e["message"] for e in cluster.events if e["kind"] == "Pod"
    ]
    # Another pool launches meanwhile.
    other = cluster.add_pod(for_pool("api", "plain"))
    run(controller, [other])
    assert cloud.verbs().count("create") == 2 and other in cluster.bound


def test_the_backoff_doubles_up_to_its_cap_and_resets_when_the_spec_changes(cluster, cloud) -> None:
    clock = Clock()
    controller = controller_for(cloud, clock=clock)
    key = cluster.add_pod(for_pool("web", "broken"))
    run(controller, [key])
    first = controller.backoff.holds()["broken"]
    assert first.until - clock.now == backoff.BASE_SECONDS
    clock.now = first.until  # the backoff has passed: one more try, refused again
    run(controller, [key])
    second = controller.backoff.holds()["broken"]
    assert cloud.verbs().count("create") == 2 and second.until - clock.now == 2 * backoff.BASE_SECONDS
    # The annotation is fixed: the hold is lifted at once, the pod gets its node.
    cluster.provisioners[0] = replace(cluster.provisioners[0], annotations={})
    run(controller, [key])
    assert key in cluster.bound and "broken" not in controller.backoff.holds()
    assert cluster.conditions[-1] == ("broken", True, "")


def test_the_cap_bounds_the_backoff() -> None:
    clock = Clock()
    pool = make_provisioner("p")
    holds = LaunchBackoff(clock)
    waits = []
    for _ in range(40):
        hold = holds.failed(pool, "refused")
        waits.append(hold.until - clock.now)
    assert waits[:3] == [60.0, 120.0, 240.0] and max(waits) == backoff.CAP_SECONDS


def test_an_ec2_refusal_for_good_backs_the_pool_off_with_one_event(cluster, cloud) -> None:
    clock = Clock()
    controller = controller_for(cloud, clock=clock)
    cloud.fail_next(
        "create", CloudError("creating fleet, TagLimitExceeded: 60 tags", code="TagLimitExceeded")
    )
    key = cluster.add_pod(for_pool("web", "plain"))
    for _ in range(12):
        run(controller, [key])
        clock.now += 5
    assert cloud.verbs().count("create") == 1 and not cluster.bound
    assert [e["reason"] for e in cluster.events if e["kind"] == "NodePool"] == ["LaunchFailed"]
    assert cluster.conditions == [("plain", False, "LaunchFailed")]


@pytest.mark.parametrize(
    ("code", "permanent"),
    [
        ("TagLimitExceeded", True),
        ("InvalidParameterValue", True),
        ("UnauthorizedOperation", True),
        ("RequestLimitExceeded", False),
        ("InternalError", False),
        ("EndpointConnectionError", False),
        ("InvalidLaunchTemplateName.NotFoundException", False),
        ("", False),
    ],
)
def test_which_cloud_errors_back_a_pool_off(code: str, permanent: bool) -> None:
    assert permanent_cloud_error(CloudError("x", code=code)) is permanent


def test_which_node_create_errors_back_a_pool_off() -> None:
    assert permanent_cluster_error(TOO_LONG)
    assert not permanent_cluster_error(Unavailable("x", status=503))
    assert not permanent_cluster_error(Invalid("x", status=429))
    assert not permanent_cluster_error(Invalid("x", status=409))


def broken_pool() -> Any:
    """A NodePool whose `Gt` requirement has 5,000 digits, built past the loader (which now refuses
    it by name) as an object stored before an upgrade, or while the webhook was down, holds it."""
    gt = {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": ["1"]}
    loaded = make_provisioner("broken", requirements=[gt])
    huge = tuple(replace(r, values=("9" * 5000,)) if r.operator == "Gt" else r for r in loaded.requirements)
    return replace(loaded, requirements=huge, kind="NodePool", resource_version="7")


def test_a_pool_the_solver_raises_on_is_left_out_and_the_others_planned(cluster, cloud, caplog) -> None:
    """A `Gt` requirement of 5,000 digits: `int()` refuses it in the solver, and every batch of
    every pool failed. Now that pool is left out, once reported."""
    cluster.provisioners[0] = broken_pool()
    controller = controller_for(cloud)
    keys = [cluster.add_pod(for_pool(f"api-{i}", "plain")) for i in range(2)]
    for key in keys:
        run(controller, [key])
        assert key in cluster.bound
    planning = [e for e in cluster.events if e["reason"] == "FailedPlanning"]
    assert [(e["kind"], e["name"]) for e in planning] == [("NodePool", "broken")]
    assert "Exceeds the limit" in planning[0]["message"]
    errors = [r for r in caplog.records if r.levelname == "ERROR" and "out of planning" in r.getMessage()]
    assert len(errors) == 1


def test_a_left_out_pool_is_reported_again_on_an_edit_not_on_a_status_write(cluster, cloud, caplog) -> None:
    """karpy rewrites a NodePool's status every minute (v1status), which bumps its resourceVersion:
    keyed on that, the left-out pool's ERROR and FailedPlanning Event came back every minute. An
    edit of its spec is news; a status write is not."""
    broken = broken_pool()
    cluster.provisioners[0] = broken
    controller = controller_for(cloud)

    def reported_after(pool: Any, name: str) -> int:
        cluster.provisioners[0] = pool
        run(controller, [cluster.add_pod(for_pool(name, "plain"))])
        return len([e for e in cluster.events if e["reason"] == "FailedPlanning"])

    assert reported_after(broken, "api-0") == 1
    assert reported_after(replace(broken, resource_version="8"), "api-1") == 1  # a status write
    edited = replace(broken, weight=(broken.weight or 0) + 1, resource_version="9")
    assert reported_after(edited, "api-2") == 2


def test_a_node_that_never_joined_holds_its_pool_until_a_node_of_it_joins(cluster, cloud) -> None:
    """Issue 35, launch and registration health: a pool whose nodes are created but never join (a
    bad security group, AMI or user data) was launched for again every batch, since the Node create
    lifted its hold. Karpenter's liveness sets NodeRegistrationHealthy=False (RegistrationFailed)
    when a NodeClaim does not register in time, True on a registration."""
    clock = Clock()
    controller = controller_for(cloud, clock=clock)
    plain = cluster.provisioners[1]
    controller.registration_failed(plain, "node n1 did not become Ready within 900s of its creation")
    hold = controller.backoff.holds()["plain"]
    assert hold.reason == backoff.REGISTRATION_FAILED
    assert cluster.conditions[-1] == ("plain", False, backoff.REGISTRATION_FAILED)
    key = cluster.add_pod(for_pool("web", "plain"))
    run(controller, [key])
    assert "create" not in cloud.verbs() and key not in cluster.bound  # held: no launch
    clock.now = hold.until  # the backoff passed: one launch, whose Node create does not lift it
    run(controller, [key])
    assert cloud.verbs().count("create") == 1 and "plain" in controller.backoff.holds()
    controller.joined(plain)  # its node became Ready
    assert "plain" not in controller.backoff.holds() and cluster.conditions[-1] == ("plain", True, "")
