"""The controller's NodeOverlays (extender/cluster/nodeoverlays.py, extender/provisioning/overlays.py)
on plain data: what the informer delivers is loaded or kept with its reason, each overlay gets
Karpenter's verdict (controllers/nodeoverlay/controller.go updateOverlayStatuses: RuntimeValidation,
Conflict, or ValidationSucceeded), and the pools a batch plans with carry the overlays that apply."""

from __future__ import annotations

from typing import Any

from extender.cluster.nodeoverlays import NodeOverlays
from extender.provisioning.overlays import Overlays
from tests.unit.scheduling.builders import catalog, make_provisioner


def obj(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1alpha1",
        "kind": "NodeOverlay",
        "metadata": {"name": name, "generation": 1},
        "spec": {
            "requirements": [
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]}
            ],
            **spec,
        },
    }


def test_events_load_reject_and_forget() -> None:
    index = NodeOverlays()
    index.on_event("ADDED", obj("cut", priceAdjustment="-10%"))
    index.on_event("ADDED", obj("bad", capacity={"cpu": "1"}))
    assert [o.name for o in index.current()] == ["cut"]
    verdicts = index.verdicts(conflicts=())
    assert verdicts["cut"] == (True, "ValidationSucceeded", "")
    ok, reason, message = verdicts["bad"]
    assert (ok, reason) == (False, "RuntimeValidation") and "spec.capacity.cpu" in message
    index.on_event("DELETED", {"metadata": {"name": "cut"}})
    assert index.current() == ()
    index.replace([obj("other", price="0.1")])
    assert [o.name for o in index.current()] == ["other"] and set(index.verdicts(())) == {"other"}


def test_conflicting_overlay_is_reported_and_left_out_of_the_pools() -> None:
    index = NodeOverlays()
    index.on_event("ADDED", obj("zeta", price="0.01"))
    index.on_event("ADDED", obj("alpha", price="0.02"))
    overlays = Overlays(index)
    pools = overlays.apply([make_provisioner("default")], catalog())
    assert [o.name for o in pools[0].overlays] == ["zeta"]
    assert index.verdicts(overlays.resolution(pools, catalog()).conflicts)["alpha"] == (
        False,
        "Conflict",
        "conflict with another overlay",
    )
    # Same inputs, same resolution object (a batch does not resolve again).
    assert overlays.resolution([make_provisioner("default")], catalog()) is overlays.resolution(
        [make_provisioner("default")], catalog()
    )
