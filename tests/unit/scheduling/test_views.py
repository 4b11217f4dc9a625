"""What the solver keeps across solves (views.py, CandidateSet memos) never changes a plan (issue 26).

The same rule-checker scenarios are solved with nothing kept (the view cache emptied and the
catalog copied, so no view, candidate set or memo carries over) and then again after every other
scenario has been solved on the same catalog object (all of them kept): the plans are equal.
"""

from __future__ import annotations

import dataclasses

from extender.api.pod import Pod
from extender.api.provisioner import Provisioner
from extender.scheduling import views
from extender.scheduling.instancetypes import InstanceType
from extender.scheduling.plan import Plan
from extender.scheduling.solver import solve
from tests.unit.scheduling import test_rule_checker as rc
from tests.unit.scheduling.builders import catalog

SEEDS = range(40)


def _solve(seed: int, types: tuple[InstanceType, ...]) -> Plan:
    s = rc.scenario(seed, rc.Features.probe())
    pods = [Pod.from_manifest(raw) for raw in s.new]
    existing = [rc._existing_node(raw) for raw in s.cluster]
    return solve(
        pods,
        s.provisioners,
        types,
        unavailable=s.unavailable,
        usage=s.usage,
        namespaces=rc.NAMESPACES,
        existing_nodes=existing,
        with_bound=seed % 4 == 0,
    )


def _same(plan: Plan) -> tuple[object, ...]:
    return (
        [
            (n.provisioner, [t.name for t in n.options], n.zone, n.price, [p.key for p in n.pods])
            for n in plan.nodes
        ],
        sorted((k, [p.key for p in v]) for k, v in plan.existing.items()),
        [(u.pod.key, u.reason) for u in plan.unschedulable],
        plan.total_price,
        plan.lower_bound,
        plan.notes,
    )


def test_plans_are_the_same_with_nothing_kept_and_with_everything_kept() -> None:
    cold = {}
    for seed in SEEDS:
        views.VIEWS.clear()
        cold[seed] = _same(_solve(seed, tuple(dataclasses.replace(t) for t in catalog())))
    shared = catalog()
    for seed in reversed(SEEDS):
        _solve(seed, shared)
    warm = {seed: _same(_solve(seed, shared)) for seed in SEEDS}
    assert warm == cold


def test_a_view_is_kept_for_the_same_catalog_and_rebuilt_when_an_item_changes() -> None:
    cache = views.ViewCache(size=2)
    types = list(catalog())
    provisioner = Provisioner(name="default")
    dims = ("cpu", "memory", "pods")
    first = cache.view_of(provisioner, types, (), dims)
    # The same items (a new list of them, an equal Provisioner): the same view.
    assert cache.view_of(Provisioner(name="default"), list(types), (), dims) is first
    # One type's offerings changed (an offering marked unavailable): a view of the new catalog.
    types[0] = types[0].with_offerings(dataclasses.replace(o, available=False) for o in types[0].offerings)
    changed = cache.view_of(provisioner, types, (), dims)
    assert changed is not first and changed.entries[0].type is types[0]
    # Other dimensions, then a third catalog: the first view falls out of the bounded cache.
    cache.view_of(provisioner, types, (), (*dims, "nvidia.com/gpu"))
    assert cache.view_of(provisioner, catalog(), (), dims) is not first
