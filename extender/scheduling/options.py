"""A packed node's options: the instance types that hold its pods, cheapest first, and the
PlannedNode the plan reports for it (labels, taints, zones and capacity types its options offer).
A NodePool with minValues gets a covering set of them instead of the cheapest few (minvalues.py)."""

from __future__ import annotations

import operator
from collections.abc import Sequence

from extender.api import labels as wk
from extender.api.resources import Resources
from extender.scheduling import minvalues
from extender.scheduling.candidates import Candidate, CandidateCache, CandidateSet, Vector, fits
from extender.scheduling.fill import Node
from extender.scheduling.memo import Memo
from extender.scheduling.plan import PlannedNode
from extender.scheduling.reservations import offering_allows, restricted, selects

_SERIAL = operator.attrgetter("serial")


class Fitting:
    """A node's candidates that hold its pods, cheapest first, at most `limit`; memoised per round
    (nodes of one pattern, which the packer repeats, ask the same). Keyed by the view's and the
    requirements' serials (memo.py)."""

    def __init__(self, cache: CandidateCache) -> None:
        self.cache = cache
        self._memo: Memo[tuple[int, int, frozenset[str], Vector, int], list[Candidate]] = Memo()

    def __call__(self, node: Node, limit: int) -> list[Candidate]:
        assert node.view is not None and node.reqs is not None
        key = (node.view.serial, node.reqs.serial, node.gpus, node.used, limit)
        return self._memo.get(key, self._fitting, node, limit)

    def cheapest(self, node: Node) -> Candidate | None:
        return next(iter(self(node, 1)), None)

    def _fitting(self, node: Node, limit: int) -> list[Candidate]:
        assert node.view is not None and node.reqs is not None
        found = self.cache.lookup(node.view, node.reqs, node.gpus)
        if mins := node.view.min_values:
            # The launch's options, not the cheapest `limit`: [] (no price) when they cannot be covered.
            covered = minvalues.options(found, node.used, mins, node.reqs, self.cache.max_options)
            return covered[:limit]
        return found.remember(("fitting", node.used, limit), lambda: _fitting(found, node.used, limit))

    def offers(self, node: Node, limit: int) -> tuple[list[str], list[str]]:
        """Zones and capacity types the node's options offer within its requirements."""
        assert node.view is not None and node.reqs is not None
        reqs, options = node.reqs, self(node, limit)

        def offered() -> tuple[list[str], list[str]]:
            reserving = selects(reqs)
            offerings = [
                o
                for c in options
                for o in c.entry.type.offerings
                if o.available and (not reserving or offering_allows(o, reqs))
            ]
            zones = {o.zone for o in offerings if reqs.allows(wk.ZONE, o.zone)}
            kinds = {o.capacity_type for o in offerings if reqs.allows(wk.CAPACITY_TYPE, o.capacity_type)}
            return sorted(zones), sorted(kinds)

        # The set is the one for these requirements, so its memo may depend on them.
        found = self.cache.lookup(node.view, reqs, node.gpus)
        return found.remember(("offers", tuple(map(_SERIAL, options))), offered)


def _fitting(found: CandidateSet, used: Vector, limit: int) -> list[Candidate]:
    """The set's candidates that hold `used`, cheapest first, at most `limit`."""
    result = []
    cpu, memory = used[0] - 1e-9, used[1] - 1e-9
    for candidate in found.candidates:
        alloc = candidate.entry.alloc
        # cpu and memory first: they rule out most types without the general check.
        if alloc[0] >= cpu and alloc[1] >= memory and fits(used, alloc):
            result.append(candidate)
            if len(result) == limit:
                break
    return result


def materialize(
    nodes: Sequence[Node], fitting: Fitting, max_options: int, dims: Sequence[str]
) -> list[PlannedNode]:
    result = []
    for node in nodes:
        assert node.view is not None and node.reqs is not None
        options = fitting(node, max_options)
        cheapest = options[0]
        zones, capacity_types = fitting.offers(node, max_options)
        provisioner = node.view.provisioner
        owner = {provisioner.owner_label: provisioner.name}
        labels = {**provisioner.labels, **owner, **node.reqs.single_values()}
        types = [c.entry.type for c in options]
        if selects(node.reqs):
            # A pod selecting a reservation launches into it only (reservations.assign).
            types = [restricted(t, node.reqs) for t in types]
        result.append(
            PlannedNode(
                provisioner=provisioner.name,
                options=tuple(types),
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
