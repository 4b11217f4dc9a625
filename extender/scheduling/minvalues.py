"""Karpenter's `minValues` on NodePool requirements: a node's instance-type options must span at
least N distinct values of the key (the max N when several requirements name it).

Karpenter (pkg/cloudprovider/types.go `SatisfiesMinValues`) counts, over the options, the values
each type's requirements give the key: its label (karpenter.k8s.aws/instance-family,
node.kubernetes.io/instance-type, kubernetes.io/arch, ...) or, for zone and capacity type, those of
its offerings. The packer lets a pod join a node only while the types that still hold the node's
pods meet every minValues (`covers`), so launch options never fall short (the Strict policy).

Truncation: Karpenter keeps the cheapest `MaxInstanceTypes` (60) and fails the launch when they
break minValues. karpy keeps the cheapest and, when those fall short, a covering set instead:
the types are taken cheapest first, each one kept only if it brings a value a short key still
needs, then the rest of the slots go to the cheapest left out (`cover`). The cheapest type is
always an option, so the node's price is unchanged; the node is refused only when no such set
fits in the limit.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from extender.api import labels as wk
from extender.scheduling.candidates import Candidate, CandidateSet, Vector, fits
from extender.scheduling.constraints import MinValues
from extender.scheduling.instancetypes import InstanceType
from extender.scheduling.requirements import Requirements


def values(instance_type: InstanceType, key: str, reqs: Requirements) -> tuple[str, ...]:
    """The values the type gives `key`: zones and capacity types of its available offerings the
    requirements allow, otherwise its label (none when it has no such label)."""
    if key in (wk.ZONE, wk.CAPACITY_TYPE):
        offered = (
            o.zone if key == wk.ZONE else o.capacity_type for o in instance_type.offerings if o.available
        )
        return tuple(v for v in offered if reqs.allows(key, v))
    if key == wk.INSTANCE_TYPE:
        return (instance_type.name,)
    if key == wk.ARCH:
        return (instance_type.arch,)
    if key == wk.OS:
        return (instance_type.os,)
    return tuple(v for k, v in instance_type.type_labels if k == key)


def unmet(options: Iterable[InstanceType], mins: MinValues, reqs: Requirements) -> list[str]:
    """The keys whose minValues the options fall short of, sorted."""
    seen: dict[str, set[str]] = {key: set() for key, _ in mins}
    for instance_type in options:
        for key, _ in mins:
            seen[key].update(values(instance_type, key, reqs))
    return [key for key, least in mins if len(seen[key]) < least]


def cover(
    options: Sequence[Candidate], mins: MinValues, reqs: Requirements, limit: int
) -> list[Candidate] | None:
    """At most `limit` of `options` (cheapest first) meeting every minValues, in their order: the
    first `limit` when they do, else a covering set topped up with the cheapest left; None if none."""
    head = list(options[:limit])
    if not unmet((c.entry.type for c in head), mins, reqs):
        return head
    seen: dict[str, set[str]] = {key: set() for key, _ in mins}
    short = {key: least for key, least in mins}
    chosen: list[int] = []
    for i, candidate in enumerate(options):
        brings = {key: set(values(candidate.entry.type, key, reqs)) - seen[key] for key in short}
        if chosen and not any(brings.values()):
            continue
        if len(chosen) == limit:
            return None
        chosen.append(i)
        for key, new in brings.items():
            seen[key] |= new
            if len(seen[key]) >= short[key]:
                del short[key]
        if not short:
            break
    if short:
        return None
    taken = set(chosen)
    rest = [i for i in range(len(options)) if i not in taken][: limit - len(chosen)]
    return [options[i] for i in sorted(chosen + rest)]


def options(
    found: CandidateSet, used: Vector, mins: MinValues, reqs: Requirements, limit: int
) -> list[Candidate]:
    """The set's types holding `used`, covered as `cover` does ([] when they cannot be): a node's
    launch options. `found` is the set for `reqs` (so they are constant per set, as the memo needs)."""

    def compute() -> list[Candidate]:
        holding = [c for c in found.candidates if fits(used, c.entry.alloc)]
        return cover(holding, mins, reqs, limit) or []

    return found.remember(("minvalues", used, limit), compute)


def reason(keys: Iterable[str]) -> str:
    """Karpenter's words (filterInstanceTypesByRequirements), with the keys."""
    return f"minValues requirement is not met for label(s) ({', '.join(keys)})"
