"""NodeOverlays on the catalog the solver sees: (catalog, a pool's overlays) -> the pool's catalog.

As Karpenter v1.14 applies them (kubernetes-sigs/karpenter pkg/controllers/nodeoverlay/controller.go
and store.go, pkg/cloudprovider/types.go `AdjustedPrice` and `ApplyCapacityOverlay`,
pkg/apis/v1alpha1/nodeoverlay.go `OrderByWeight`):
- Precedence: higher `weight` first (unset = 0); equal weights by name, the name later in the
  alphabet first.
- Selection, per pool and instance type: the type's labels, the pool's template labels and its
  owner label (`karpenter.sh/nodepool: <name>`) must meet every requirement (a key none of them
  has meets only NotIn / DoesNotExist); zone and capacity type select the type's offerings. A type
  with no selected offering is not touched.
- Price: each selected offering takes the price of the first overlay in precedence order that
  selects it (overlays do not stack): "0.5" replaces it, "+0.1"/"-0.1" adds, "+10%"/"-10%" scales,
  never below 0. karpy ranks by price per unit, so a price of 0 counts as `MIN_PRICE`.
- Capacity: each resource named takes the first overlay's amount; the type keeps everything else.
- Conflict (`resolve`): an overlay whose weight equals the last one that set the same offering's
  price, or the same resource of the same type's capacity, on any pool, is not applied at all; its
  status says Conflict. Overlays of different weights never conflict.

Pure: `resolve` decides which overlays each Provisioner gets (`Provisioner.overlays`), and
`ProvisionerView.build` (candidates.py) applies them with `overlaid`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from extender.api import labels as wk
from extender.api.provisioner import Overlay, Provisioner
from extender.api.resources import Resources
from extender.scheduling.instancetypes import InstanceType, Offering
from extender.scheduling.requirements import Requirements

#: The lowest price an overlay leaves on an offering: the packer ranks nodes by worth per dollar.
MIN_PRICE = 1e-6
#: Offering.price_source of an overlaid price: "nodeoverlay <name>".
SOURCE = "nodeoverlay"


def precedence(overlays: Iterable[Overlay]) -> list[Overlay]:
    """Karpenter's OrderByWeight: weight descending, then name descending."""
    by_name = sorted(overlays, key=lambda o: o.name, reverse=True)
    return sorted(by_name, key=lambda o: -o.weight)


def adjusted_price(price: float, change: str | None) -> float:
    """Karpenter's AdjustedPrice: an unsigned number is the price, a signed one is added, a signed
    percentage scales; the result is never below 0."""
    if not change:
        return price
    if change[0] not in "+-":
        return float(change)
    percent = change.endswith("%")
    adjusted = price * (1 + float(change[:-1]) / 100) if percent else price + float(change)
    return max(adjusted, 0.0)


def pool_labels(pool: Provisioner) -> dict[str, str]:
    """What an overlay may select a pool by, besides its types: template labels and owner label."""
    return {**{wk.normalize_key(k): v for k, v in pool.labels.items()}, pool.owner_label: pool.name}


def selected(reqs: Requirements, labels: Mapping[str, str], itype: InstanceType) -> tuple[Offering, ...]:
    """The offerings of `itype` an overlay's requirements select on a pool with `labels`; () when
    they select not the type at all (Karpenter's getOverlaidOfferings)."""
    world = {**labels, **itype.labels()}
    for key, values in reqs:
        if key == wk.ZONE:
            present = {o.zone for o in itype.offerings}
        elif key == wk.CAPACITY_TYPE:
            present = {o.capacity_type for o in itype.offerings}
        elif key in world:
            present = {world[key]}
        else:
            if not values.allow_absent:
                return ()
            continue
        if not any(values.contains(v) for v in present):
            return ()
    zones, capacity_types = reqs.get(wk.ZONE), reqs.get(wk.CAPACITY_TYPE)
    return tuple(
        o for o in itype.offerings if zones.contains(o.zone) and capacity_types.contains(o.capacity_type)
    )


@dataclass(frozen=True)
class Resolution:
    """The pools with the overlays that apply to them, and the overlays left out for a conflict."""

    provisioners: tuple[Provisioner, ...]
    conflicts: tuple[str, ...] = ()


def resolve(
    overlays: Sequence[Overlay], provisioners: Sequence[Provisioner], catalog: Sequence[InstanceType]
) -> Resolution:
    """Which overlays each pool gets, in precedence order, and which conflict (Karpenter's
    nodeoverlay controller: every overlay checked against every pool before any is stored)."""
    if not overlays:
        return Resolution(tuple(replace(p, overlays=()) if p.overlays else p for p in provisioners))
    labels = {p.name: pool_labels(p) for p in provisioners}
    # The weight that last set each (pool, type, zone, capacity type) price; per (pool, type) the
    # weight and resource names of the last capacity overlay (store.go keeps only the last one's).
    prices: dict[tuple[str, str, str, str], int] = {}
    capacities: dict[tuple[str, str], tuple[int, frozenset[str]]] = {}
    applied: dict[str, list[Overlay]] = {}
    conflicts: list[str] = []
    for overlay in precedence(overlays):
        reqs = Requirements.from_requirements(overlay.requirements)
        hits = [
            (pool.name, itype.name, found)
            for pool in provisioners
            for itype in catalog
            if (found := selected(reqs, labels[pool.name], itype))
        ]
        names = overlay.capacity.names()
        price_keys = [(p, t, o.zone, o.capacity_type) for p, t, found in hits for o in found]
        if (overlay.price is not None and any(prices.get(k) == overlay.weight for k in price_keys)) or (
            names
            and any(
                (last := capacities.get((p, t))) is not None and last[0] == overlay.weight and last[1] & names
                for p, t, _ in hits
            )
        ):
            conflicts.append(overlay.name)
            continue
        if overlay.price is not None:
            prices.update((k, overlay.weight) for k in price_keys)
        if names:
            capacities.update(((p, t), (overlay.weight, names)) for p, t, _ in hits)
        for pool_name in dict.fromkeys(p for p, _, _ in hits):
            applied.setdefault(pool_name, []).append(overlay)
    return Resolution(
        tuple(replace(p, overlays=tuple(applied.get(p.name, ()))) for p in provisioners), tuple(conflicts)
    )


def _with_capacity(itype: InstanceType, added: Mapping[str, float]) -> InstanceType:
    """`itype` with `added` in its capacity: an accelerator it lists is replaced (GPU time-slicing),
    anything else goes with the other extended resources; capacity and allocatable follow."""
    gpus = {n: q for n, q in added.items() if itype.gpus.get(n)}
    extended = {n: q for n, q in added.items() if n not in gpus}
    capacity = Resources({**itype.capacity.amounts, **added})
    return replace(
        itype,
        gpus=Resources({**itype.gpus.amounts, **gpus}),
        extended=Resources({**itype.extended.amounts, **extended}),
        capacity=capacity,
        allocatable=capacity - itype.overhead,
    )


def overlaid(catalog: Sequence[InstanceType], pool: Provisioner) -> Sequence[InstanceType]:
    """The catalog as `pool` sees it with its overlays applied (the same list when it has none)."""
    if not pool.overlays:
        return catalog
    labels = pool_labels(pool)
    rules = [(o, Requirements.from_requirements(o.requirements)) for o in pool.overlays]
    result = []
    for itype in catalog:
        prices: dict[tuple[str, str], Overlay] = {}
        capacity: dict[str, float] = {}
        for overlay, reqs in rules:
            found = selected(reqs, labels, itype)
            if not found:
                continue
            if overlay.price is not None:
                for o in found:
                    prices.setdefault((o.zone, o.capacity_type), overlay)
            for name, amount in overlay.capacity.amounts.items():
                capacity.setdefault(name, amount)
        if prices:
            itype = itype.with_offerings(
                _priced(o, prices.get((o.zone, o.capacity_type))) for o in itype.offerings
            )
        if capacity:
            itype = _with_capacity(itype, capacity)
        result.append(itype)
    return result


def _priced(offering: Offering, overlay: Overlay | None) -> Offering:
    if overlay is None:
        return offering
    price = max(adjusted_price(offering.price, overlay.price), MIN_PRICE)
    return replace(offering, price=price, price_source=f"{SOURCE} {overlay.name}")
