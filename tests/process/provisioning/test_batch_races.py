"""A provisioning batch under a real race: a failed launch group must wait for a sibling group
that is still binding (moved from tests/unit: it waits on the wall clock, issue 23)."""

from __future__ import annotations

import threading
from typing import Any

from extender.api import labels as wk
from extender.cluster.errors import Unavailable
from extender.state import ClusterState
from tests.unit.provisioning.test_controller import cloud, cluster, controller_for, for_provisioner, run
from tests.unit.scheduling.builders import make_provisioner

__all__ = ["cloud", "cluster"]  # the fixtures, shared with the unit tests


def test_a_failed_group_waits_for_its_siblings_before_the_claims_are_released(cluster, cloud) -> None:
    """Issue 13, item 5: a group whose node cannot be created must not end the batch (and release
    the claims on its pods) while a sibling group is still binding."""
    cluster.provisioners = [make_provisioner("a"), make_provisioner("b")]
    failing, binding = (
        cluster.add_pod(for_provisioner("pa", "a")),
        cluster.add_pod(for_provisioner("pb", "b")),
    )
    state = ClusterState()
    released = threading.Event()
    real_unclaim, real_create, real_bind = state.unclaim, cluster.create_node, cluster.bind
    claimed_while_binding: list[bool] = []

    def unclaim(keys: Any) -> None:
        released.set()
        real_unclaim(keys)

    def create_node(kube: Any, manifest: dict[str, Any]) -> bool:
        if manifest["metadata"]["labels"][wk.PROVISIONER_NAME] == "a":
            raise Unavailable("creating node: 503 the server is shutting down", status=503)
        return real_create(kube, manifest)

    def bind(kube: Any, *, namespace: str, name: str, uid: str, node: str) -> None:
        released.wait(0.5)  # long enough for a failed sibling to end the batch
        claimed_while_binding.append(state.claimed(f"{namespace}/{name}"))
        real_bind(kube, namespace=namespace, name=name, uid=uid, node=node)

    state.unclaim = unclaim  # type: ignore[method-assign]
    cluster.monkeypatch.setattr("extender.cluster.nodes.create_node", create_node)
    cluster.monkeypatch.setattr("extender.cluster.bind.bind", bind)
    controller = controller_for(cloud, state=state)
    run(controller, [failing, binding])
    assert claimed_while_binding == [True]
    assert cluster.bound == {binding: next(iter(cluster.nodes))}
    assert failing in controller.parked and not state.claimed(failing)
