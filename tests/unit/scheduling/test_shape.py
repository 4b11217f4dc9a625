"""Issue 23: one shape value decides how pods are grouped; a field added to it is seen by every
grouping (the packer's classes, hostname rules, the domain planner's signature and the resolver's
domain memo) without touching them."""

from __future__ import annotations

import dataclasses

import pytest

from extender.api.pod import Pod
from extender.api.provisioner import Provisioner
from extender.scheduling import shape as shape_module
from extender.scheduling.candidates import CandidateCache, ProvisionerView
from extender.scheduling.classes import Matcher, build_classes
from extender.scheduling.domains import DomainPlanner
from extender.scheduling.requirements import Requirements
from extender.scheduling.resolver import Resolver
from extender.scheduling.shape import FIELDS, GROUPINGS, Shape, Shapes
from extender.scheduling.solver import _NewNodes, dimensions
from extender.scheduling.topology import Terms
from tests import builders
from tests.unit.scheduling.builders import catalog

#: A field a future constraint could add; here it holds a label no selector looks at.
EXTRA_LABEL = "example.com/extra"


BASE_OF = Shape.of


@dataclasses.dataclass(frozen=True, eq=False)
class Extended(Shape):
    extra: str = ""


def _extended(pod: Pod) -> Shape:
    base = BASE_OF(pod)
    values = {
        f.name: getattr(base, f.name) for f in dataclasses.fields(Shape) if f.init and f.name != "_keys"
    }
    return Extended(**values, extra=pod.labels.get(EXTRA_LABEL, ""))


def _add_field(monkeypatch: pytest.MonkeyPatch) -> None:
    """Shape with one more field, as if a constraint had been added to it."""
    monkeypatch.setattr(shape_module, "FIELDS", (*FIELDS, "extra"))
    monkeypatch.setattr(Shape, "of", classmethod(lambda cls, pod: _extended(pod)))


def _pods() -> list[Pod]:
    return [builders.pod(f"p{i}", cpu="1", labels={"app": "web", EXTRA_LABEL: str(i)}) for i in range(2)]


def test_pods_alike_but_for_an_unselected_label_share_every_grouping():
    a, b = (Shape.of(p) for p in _pods())
    for name, grouping in GROUPINGS.items():
        if "labels" in grouping:
            assert a.key(grouping) == b.key(grouping), name


def test_every_grouping_sees_a_field_added_to_the_shape(monkeypatch: pytest.MonkeyPatch):
    _add_field(monkeypatch)
    shapes = Shapes()
    a, b = (shapes(p) for p in _pods())
    assert isinstance(a, Extended)
    for name, grouping in GROUPINGS.items():
        assert a.key(grouping) != b.key(grouping), name


def _resolver(shapes: Shapes) -> Resolver:
    pods = _pods()
    dims = dimensions(pods, ())
    views = [ProvisionerView.build(Provisioner(name="default"), catalog(), (), dims)]
    return Resolver(views, CandidateCache(()), dims, shapes)


def _classes(shapes: Shapes) -> int:
    terms = Terms()
    classes = build_classes(
        _pods(),
        shapes=shapes,
        resolver=_resolver(shapes),
        terms=terms,
        matcher=Matcher(terms),
        namespaces=None,
        pins={},
        skip={},
        sort="cpu",
    )
    return len(classes)


def _signatures(shapes: Shapes) -> int:
    planner = DomainPlanner((), None, _NewNodes(_resolver(shapes), {}), shapes=shapes)
    return len({planner.signature(p) for p in _pods()})


def _domain_memos(shapes: Shapes) -> int:
    resolver = _resolver(shapes)
    for pod in _pods():
        resolver.domains(pod, "topology.kubernetes.io/zone", Requirements(), fit=True)
    return len(resolver._domains)


@pytest.mark.parametrize("users", [_classes, _signatures, _domain_memos])
def test_the_users_group_by_the_shape(users, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """Without the field the two pods are one group for each user; with it, two."""
    assert users(Shapes()) == 1
    _add_field(monkeypatch)
    assert users(Shapes()) == 2


def test_a_grouping_may_only_name_shape_fields():
    with pytest.raises(AssertionError, match="not a Shape field"):
        shape_module._grouping("labels", "no_such_field")
