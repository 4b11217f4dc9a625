"""Memo keys are serials objects take when made, never `id()` (memo.py): a requirement set made
after another was dropped, at the same address, is not mistaken for it."""

from __future__ import annotations

import gc

from extender.api import labels as wk
from extender.api.provisioner import Provisioner
from extender.scheduling.candidates import CandidateCache, ProvisionerView
from extender.scheduling.fill import Node
from extender.scheduling.options import Fitting
from extender.scheduling.requirements import Requirements, ValueSet
from tests.unit.scheduling.builders import catalog

DIMS = ("cpu", "memory", "pods")


def one_type(name: str) -> Requirements:
    return Requirements.of({wk.INSTANCE_TYPE: ValueSet(False, frozenset({name}), allow_absent=False)})


def test_a_dropped_requirement_sets_options_are_not_handed_to_a_new_one() -> None:
    view = ProvisionerView.build(Provisioner(name="default"), catalog(), (), DIMS)
    fitting = Fitting(CandidateCache(()))
    used = (0.5, 1.0, 1.0)
    first = fitting(Node(capacity=(), used=used, view=view, reqs=one_type("m5.large")), 3)
    assert [c.entry.type.name for c in first] == ["m5.large"]
    # The first set is gone (the node held the only reference); a new one of the same size may
    # well be made at its address, as a rejected repack's nodes are replaced by new ones.
    for _ in range(50):
        gc.collect()
        found = fitting(Node(capacity=(), used=used, view=view, reqs=one_type("c5.xlarge")), 3)
        assert [c.entry.type.name for c in found] == ["c5.xlarge"]


def test_serials_are_not_values() -> None:
    a, b = one_type("m5.large"), one_type("m5.large")
    assert a == b and hash(a) == hash(b)  # equal values, as before
    assert a.serial != b.serial  # two objects, two memo keys
