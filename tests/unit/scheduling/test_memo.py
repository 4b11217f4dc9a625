"""Memo keys are serials objects take when made, never `id()` (memo.py): a requirement set made
after another was dropped, at the same address, is not mistaken for it."""

from __future__ import annotations

from extender.api import labels as wk
from extender.scheduling.memo import Memo
from extender.scheduling.requirements import Requirements, ValueSet


def one_type(name: str) -> Requirements:
    return Requirements.of({wk.INSTANCE_TYPE: ValueSet(False, frozenset({name}), allow_absent=False)})


def test_a_dropped_sets_serial_is_never_given_to_a_new_one() -> None:
    """memo.py: a key names an object by its serial, never its id(). CPython gives a freed object's
    address to the next object of its size, so a memo keyed by address would hand a dropped set's
    result to the new set made there. (The packer's own memos never see that today: the candidate
    cache and the provisioner view keep each set alive for the round; this guards the key itself.
    The test it replaces went through them and so never saw an address reused.)"""
    memo: Memo[int, str] = Memo()
    gone = one_type("m5.large")
    serial, address = gone.serial, id(gone)
    assert memo.get(serial, lambda: "m5.large") == "m5.large"
    del gone
    made = [one_type("c5.xlarge") for _ in range(100)]
    reused = [m for m in made if id(m) == address]
    assert reused, "no new set took the dropped one's address: the case this guards did not arise"
    assert memo.get(reused[0].serial, lambda: "c5.xlarge") == "c5.xlarge"


def test_serials_are_not_values() -> None:
    a, b = one_type("m5.large"), one_type("m5.large")
    assert a == b and hash(a) == hash(b)  # equal values, as before
    assert a.serial != b.serial  # two objects, two memo keys
