"""A packed node's options: the instance types that hold its pods, cheapest first, and the
PlannedNode the plan reports for it (labels, taints, zones and capacity types its options offer)."""

from __future__ import annotations

from collections.abc import Sequence

from extender.api import labels as wk
from extender.api.resources import Resources
from extender.scheduling.candidates import Candidate, CandidateCache, Vector, fits
from extender.scheduling.packer import Node
from extender.scheduling.plan import PlannedNode


class Fitting:
    """A node's candidates that hold its pods, cheapest first, at most `limit`; memoised per round
    (nodes of one pattern, which the packer repeats, ask the same). Keyed by identity of the view
    and requirements, which the round's nodes keep alive."""

    def __init__(self, cache: CandidateCache) -> None:
        self.cache = cache
        self._memo: dict[tuple[int, int, frozenset[str], Vector, int], list[Candidate]] = {}

    def __call__(self, node: Node, limit: int) -> list[Candidate]:
        key = (id(node.view), id(node.reqs), node.gpus, node.used, limit)
        if (found := self._memo.get(key)) is None:
            found = self._memo[key] = self._fitting(node, limit)
        return found

    def cheapest(self, node: Node) -> Candidate | None:
        return next(iter(self(node, 1)), None)

    def _fitting(self, node: Node, limit: int) -> list[Candidate]:
        assert node.view is not None and node.reqs is not None
        result = []
        cpu, memory = node.used[0] - 1e-9, node.used[1] - 1e-9
        for candidate in self.cache.lookup(node.view, node.reqs, node.gpus).candidates:
            alloc = candidate.entry.alloc
            # cpu and memory first: they rule out most types without the general check.
            if alloc[0] >= cpu and alloc[1] >= memory and fits(node.used, alloc):
                result.append(candidate)
                if len(result) == limit:
                    break
        return result


def materialize(
    nodes: Sequence[Node], fitting: Fitting, max_options: int, dims: Sequence[str]
) -> list[PlannedNode]:
    result = []
    # Zones and capacity types per (requirements, options): the same for every node of a pattern.
    offers: dict[tuple[int, int], tuple[list[str], list[str]]] = {}
    for node in nodes:
        assert node.view is not None and node.reqs is not None
        options = fitting(node, max_options)
        cheapest = options[0]
        if (found := offers.get((id(node.reqs), id(options)))) is None:
            offered = [o for c in options for o in c.entry.type.offerings if o.available]
            found = offers[(id(node.reqs), id(options))] = (
                sorted({o.zone for o in offered if node.reqs.allows(wk.ZONE, o.zone)}),
                sorted(
                    {o.capacity_type for o in offered if node.reqs.allows(wk.CAPACITY_TYPE, o.capacity_type)}
                ),
            )
        zones, capacity_types = found
        provisioner = node.view.provisioner
        owner = {provisioner.owner_label: provisioner.name}
        labels = {**provisioner.labels, **owner, **node.reqs.single_values()}
        result.append(
            PlannedNode(
                provisioner=provisioner.name,
                options=tuple(c.entry.type for c in options),
                zones=tuple(zones),
                capacity_types=tuple(capacity_types),
                zone=cheapest.offering.zone,
                capacity_type=cheapest.offering.capacity_type,
                price=cheapest.offering.price,
                pods=tuple(node.pods),
                labels=labels,
                taints=tuple(provisioner.taints),
                requests=Resources(dict(zip(dims, node.used, strict=True))),
            )
        )
    return result
