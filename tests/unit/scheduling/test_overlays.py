"""NodeOverlays on the solver's catalog (extender/scheduling/overlays.py), rule by rule, each against
the Karpenter v1.14 source it ports (kubernetes-sigs/karpenter)."""

from __future__ import annotations

from typing import Any

import pytest

from extender.api.nodeoverlay import load_nodeoverlay
from extender.api.provisioner import Overlay, Provisioner
from extender.scheduling.instancetypes import InstanceType, NodeSettings
from extender.scheduling.overlays import MIN_PRICE, adjusted_price, overlaid, precedence, resolve
from extender.scheduling.solver import solve
from tests import builders
from tests.unit.scheduling.builders import catalog, make_provisioner

TYPE = "node.kubernetes.io/instance-type"


def overlay(name: str, *requirements: dict[str, Any], **spec: Any) -> Overlay:
    return load_nodeoverlay(
        {"metadata": {"name": name}, "spec": {"requirements": list(requirements), **spec}}
    )


def types(*names: str) -> dict[str, Any]:
    return {"key": TYPE, "operator": "In", "values": list(names)}


def nodepool(name: str = "default", labels: dict[str, str] | None = None) -> Provisioner:
    return builders.nodepool(name, labels=labels or {})


def entry(
    name: str, pool: Provisioner, overlays: list[Overlay], cat: tuple[InstanceType, ...] = ()
) -> InstanceType:
    cat = cat or catalog()
    applied = resolve(overlays, [pool], cat).provisioners[0]
    return next(t for t in overlaid(cat, applied) if t.name == name)


def base(name: str) -> InstanceType:
    return next(t for t in catalog() if t.name == name)


def prices(itype: InstanceType) -> dict[tuple[str, str], float]:
    return {(o.zone, o.capacity_type): o.price for o in itype.offerings}


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ("0.5", 0.5),
        ("+0.25", 1.25),
        ("-0.25", 0.75),
        ("+10%", 1.1),
        ("-10%", 0.9),
        ("-100%", 0.0),
        ("-5", 0.0),
    ],
)
def test_adjusted_price(change: str, expected: float) -> None:
    """pkg/cloudprovider/types.go AdjustedPrice (and its suite_test.go "AdjustedPrice" table):
    unsigned = the price, signed = added, signed % = scaled, floored at 0."""
    assert adjusted_price(1.0, change) == pytest.approx(expected)


def test_precedence_is_weight_then_name_descending() -> None:
    """pkg/apis/v1alpha1/nodeoverlay.go OrderByWeight: higher weight first; equal weights, the name
    later in the alphabet first; an unset weight is 0."""
    found = precedence([overlay("a", weight=5), overlay("b"), overlay("c", weight=5), overlay("d", weight=9)])
    assert [o.name for o in found] == ["d", "c", "a", "b"]


def test_price_adjustment_changes_only_the_selected_type() -> None:
    """controller.go getOverlaidOfferings + store.go applyPriceOverlays: only offerings of types the
    requirements select change; others are the very same objects."""
    pool = nodepool()
    cut = entry("m5.large", pool, [overlay("cut", types("m5.large"), priceAdjustment="-50%")])
    for key, price in prices(base("m5.large")).items():
        assert prices(cut)[key] == pytest.approx(price / 2)
    assert all(o.price_source == "nodeoverlay cut" for o in cut.offerings)
    assert entry("c5.large", pool, [overlay("cut", types("m5.large"), priceAdjustment="-50%")]) is base(
        "c5.large"
    )


def test_absolute_price_and_capacity_type_selects_offerings() -> None:
    """controller.go: `it.Offerings.Compatible(overlayReq)`: a capacity-type (or zone) requirement
    selects offerings, not the whole type."""

    def on_m5(name: str, key: str, value: str, price: str) -> Overlay:
        return overlay(
            name, types("m5.large"), {"key": key, "operator": "In", "values": [value]}, price=price
        )

    got = entry("m5.large", nodepool(), [on_m5("spot", "karpenter.sh/capacity-type", "spot", "0.01")])
    for (zone, capacity_type), price in prices(got).items():
        assert price == (0.01 if capacity_type == "spot" else prices(base("m5.large"))[(zone, capacity_type)])
    got = entry("m5.large", nodepool(), [on_m5("zone", "topology.kubernetes.io/zone", "us-west-2b", "0.02")])
    assert {z for (z, _), p in prices(got).items() if p == 0.02} == {"us-west-2b"}


def test_nodepool_name_and_template_labels_select_pools() -> None:
    """controller.go getOverlaidOfferings: the instance type's requirements plus
    `karpenter.sh/nodepool: <name>` and the NodePool's template labels."""
    by_pool = overlay(
        "p",
        types("m5.large"),
        {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["batch"]},
        price="0.01",
    )
    by_label = overlay(
        "l", types("m5.large"), {"key": "team", "operator": "In", "values": ["ml"]}, price="0.02"
    )
    assert prices(entry("m5.large", nodepool("batch"), [by_pool]))[("us-west-2a", "on-demand")] == 0.01
    assert entry("m5.large", nodepool("web"), [by_pool]) is base("m5.large")
    assert (
        prices(entry("m5.large", nodepool("x", {"team": "ml"}), [by_label]))[("us-west-2a", "on-demand")]
        == 0.02
    )
    assert entry("m5.large", nodepool("x", {"team": "web"}), [by_label]) is base("m5.large")


def test_a_key_nothing_carries_matches_only_notin_and_doesnotexist() -> None:
    """Requirements.Compatible (pkg/scheduling/requirements.go): a key the type and pool do not
    define is allowed only for NotIn / DoesNotExist."""
    pool = nodepool()
    absent_in = overlay(
        "in", types("m5.large"), {"key": "example.com/x", "operator": "In", "values": ["a"]}, price="0.01"
    )
    absent_notin = overlay(
        "notin",
        types("m5.large"),
        {"key": "example.com/x", "operator": "NotIn", "values": ["a"]},
        price="0.01",
    )
    assert entry("m5.large", pool, [absent_in]) is base("m5.large")
    assert prices(entry("m5.large", pool, [absent_notin]))[("us-west-2a", "on-demand")] == 0.01


def test_price_overlays_do_not_stack_the_highest_weight_wins() -> None:
    """store.go updateInstanceTypeOffering: an offering already overlaid keeps its first (highest
    precedence) price; a lower-weight overlay only records its weight."""
    high = overlay("high", types("m5.large"), price="0.03", weight=20)
    low = overlay("low", types("m5.large"), priceAdjustment="-90%", weight=10)
    resolution = resolve([low, high], [nodepool()], catalog())
    assert resolution.conflicts == ()
    got = next(t for t in overlaid(catalog(), resolution.provisioners[0]) if t.name == "m5.large")
    assert set(prices(got).values()) == {0.03}


def test_equal_weight_price_overlays_on_one_offering_conflict() -> None:
    """controller.go validateInstanceTypesOverride + store.go isOfferingUpdateConflicting: two
    price overlays of one weight on the same offering: the later in precedence (name earlier in the
    alphabet) is not applied anywhere, and reported as a conflict."""
    zeta = overlay("zeta", types("m5.large", "c5.large"), price="0.03", weight=10)
    alpha = overlay("alpha", types("m5.large"), price="0.04", weight=10)
    resolution = resolve([alpha, zeta], [nodepool()], catalog())
    assert resolution.conflicts == ("alpha",)
    assert [o.name for o in resolution.provisioners[0].overlays] == ["zeta"]
    # Different offerings, or different weights: no conflict.
    other = overlay("alpha", types("c5.xlarge"), price="0.04", weight=10)
    assert resolve([other, zeta], [nodepool()], catalog()).conflicts == ()
    lower = overlay("alpha", types("m5.large"), price="0.04", weight=9)
    assert resolve([lower, zeta], [nodepool()], catalog()).conflicts == ()


def test_conflict_on_one_pool_drops_the_overlay_from_every_pool() -> None:
    """controller.go validateAndUpdateInstanceTypeOverrides: validated on every NodePool before any
    update is stored, so a conflict on one pool leaves the overlay out of all of them."""
    zeta = overlay(
        "zeta",
        types("m5.large"),
        {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["a"]},
        price="0.03",
    )
    alpha = overlay("alpha", types("m5.large"), price="0.04")
    resolution = resolve([alpha, zeta], [nodepool("a"), nodepool("b")], catalog())
    assert resolution.conflicts == ("alpha",)
    assert [p.overlays for p in resolution.provisioners] == [(zeta,), ()]


def test_capacity_adds_extended_resources_and_first_weight_wins_per_resource() -> None:
    """store.go updateInstanceTypeCapacity + types.go ApplyCapacityOverlay: resources merge, a
    resource already set by a higher weight keeps its amount; cpu/memory/pods are untouched."""
    high = overlay("high", types("m5.large"), capacity={"example.com/widget": 4}, weight=20)
    low = overlay(
        "low", types("m5.large"), capacity={"example.com/widget": 1, "hugepages-2Mi": "1Gi"}, weight=10
    )
    got = entry("m5.large", nodepool(), [low, high])
    original = base("m5.large")
    assert got.capacity.get("example.com/widget") == 4
    assert got.allocatable.get("example.com/widget") == 4
    assert got.capacity.get("hugepages-2Mi") == 2**30
    for name in ("cpu", "memory", "pods", "ephemeral-storage"):
        assert got.capacity.get(name) == original.capacity.get(name)
        assert got.allocatable.get(name) == original.allocatable.get(name)


def test_equal_weight_capacity_on_the_same_resource_conflicts() -> None:
    """store.go isCapacityUpdateConflicting: same weight, same type, a resource in common."""
    zeta = overlay("zeta", types("m5.large"), capacity={"example.com/widget": 4})
    alpha = overlay("alpha", types("m5.large"), capacity={"example.com/widget": 2})
    other = overlay("alpha", types("m5.large"), capacity={"example.com/gadget": 2})
    assert resolve([alpha, zeta], [nodepool()], catalog()).conflicts == ("alpha",)
    assert resolve([other, zeta], [nodepool()], catalog()).conflicts == ()


def test_gpu_time_slicing_replaces_the_accelerator_count() -> None:
    """The NodeOverlay design's GPU time-slicing use (designs/node-overlay.md): an accelerator the
    type has is replaced, and survives a pool's node settings (for_node rebuilds capacity)."""
    gpu_type = next(t for t in catalog() if t.gpus.get("nvidia.com/gpu") == 1)
    sliced = entry(
        gpu_type.name, nodepool(), [overlay("slice", types(gpu_type.name), capacity={"nvidia.com/gpu": 4})]
    )
    assert sliced.capacity.get("nvidia.com/gpu") == 4
    assert sliced.for_node(NodeSettings(max_pods=20)).capacity.get("nvidia.com/gpu") == 4


def test_a_price_cut_changes_the_type_the_solver_launches() -> None:
    """End to end through solve(): the cheapest type for a pod loses to one an overlay makes cheaper."""
    pool = make_provisioner()
    pod = builders.pod("p", cpu="1", memory="1Gi")
    before = solve([pod], [pool], catalog(), with_bound=False).nodes[0]
    rival = next(t for t in ("m5.large", "c5.large", "m6g.large") if t != before.instance_type.name)
    cut = overlay("cut", types(rival), priceAdjustment="-99%")
    applied = resolve([cut], [pool], catalog()).provisioners
    after = solve([pod], list(applied), catalog(), with_bound=False).nodes[0]
    assert after.instance_type.name == rival
    assert after.price < before.price


def test_a_capacity_overlay_makes_a_pod_requesting_it_schedulable() -> None:
    """kube-scheduler NodeResourcesFit counts an unlisted resource as 0: without the overlay the pod
    fits no type; with it, it gets a node of a type the overlay selects, carrying the resource."""
    pool = make_provisioner()
    pod = builders.pod(
        "p",
        cpu="1",
        containers=[
            {
                "name": "c",
                "resources": {
                    "requests": {"cpu": "1", "example.com/widget": "2"},
                    "limits": {"example.com/widget": "2"},
                },
            }
        ],
    )
    assert not solve([pod], [pool], catalog(), with_bound=False).nodes
    widgets = overlay(
        "widgets",
        {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m5"]},
        capacity={"example.com/widget": 4},
    )
    applied = resolve([widgets], [pool], catalog()).provisioners
    node = solve([pod], list(applied), catalog(), with_bound=False).nodes[0]
    assert node.instance_type.name.startswith("m5.")
    assert node.instance_type.allocatable.get("example.com/widget") == 4


def test_a_zero_price_ranks_as_the_floor() -> None:
    """Karpenter admits price "0" and "-100%"; karpy ranks by worth per dollar, so 0 is MIN_PRICE."""
    got = entry("m5.large", nodepool(), [overlay("free", types("m5.large"), price="0")])
    assert set(prices(got).values()) == {MIN_PRICE}


def test_no_overlays_is_the_same_catalog() -> None:
    pool = nodepool()
    assert overlaid(catalog(), resolve([], [pool], catalog()).provisioners[0]) is catalog()
