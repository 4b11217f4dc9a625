"""Requirements algebra: operators, intersection, alias key, conflicts, label matching."""

from extender.api import labels as wk
from extender.api.provisioner import Requirement
from extender.scheduling.requirements import Requirements


def reqs(*items):
    return Requirements.from_requirements(Requirement(k, op, tuple(v)) for k, op, v in items)


def test_in_sets_intersect_and_notin_subtracts():
    r = reqs(("zone", "In", ["a", "b", "c"]), ("zone", "NotIn", ["b"])).intersect(
        reqs(("zone", "In", ["b", "c"]))
    )
    assert r.get("zone").values == frozenset({"c"})


def test_exists_and_doesnotexist_on_absent_labels():
    assert not reqs(("team", "Exists", [])).matches({})
    assert reqs(("team", "DoesNotExist", [])).matches({})
    assert reqs(("team", "NotIn", ["x"])).matches({})
    assert not reqs(("team", "DoesNotExist", [])).matches({"team": "a"})


def test_gt_lt_bounds():
    r = reqs(("gen", "Gt", ["4"]), ("gen", "Lt", ["7"]))
    assert r.matches({"gen": "5"}) and not r.matches({"gen": "7"}) and not r.matches({"gen": "x"})
    assert reqs(("gen", "Gt", ["4"]), ("gen", "Lt", ["5"])).conflict() is not None


def test_alias_capacity_type_key_is_normalised():
    r = reqs((wk.CAPACITY_TYPE_ALIAS, "In", ["spot"]))
    assert r.keys() == {wk.CAPACITY_TYPE} and r.allows(wk.CAPACITY_TYPE, "spot")


def test_conflicting_ins_report_a_conflict():
    assert "no value of" in reqs((wk.ARCH, "In", ["arm64"]), (wk.ARCH, "In", ["amd64"])).conflict()


def test_custom_key_needs_a_provisioner_that_sets_it():
    r = reqs(("team", "In", ["a"]))
    assert "no provisioner sets it" in r.conflict()
    assert r.conflict(defined_keys={"team"}) is None


def test_single_values_become_labels():
    assert reqs(("zone", "In", ["a"]), ("arch", "In", ["x", "y"])).single_values() == {"zone": "a"}
