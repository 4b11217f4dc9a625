"""Node-label requirements algebra: In, NotIn, Exists, DoesNotExist, Gt, Lt over label keys.

A `Requirements` is an immutable map of key -> `ValueSet`; intersecting the Provisioner's,
the pod's and an instance type's requirements tells whether they can meet on one node and
which label values remain. Keys are normalised (`node.k8s.aws/capacity-type` is the old
name of `karpenter.sh/capacity-type`). Used by provisioner selection and the solver.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from extender.api import labels as wk
from extender.api.provisioner import Requirement
from extender.scheduling.memo import serial


@dataclass(frozen=True)
class ValueSet:
    """The label values one key may take; `complement` means "anything except `values`".

    `allow_absent` is whether a node without the label satisfies it (NotIn, DoesNotExist do).
    """

    complement: bool = True
    values: frozenset[str] = frozenset()
    gt: int | None = None
    lt: int | None = None
    allow_absent: bool = True

    @classmethod
    def of(cls, req: Requirement) -> ValueSet:
        values = frozenset(req.values)
        if req.operator == "In":
            return cls(complement=False, values=values, allow_absent=False)
        if req.operator == "NotIn":
            return cls(complement=True, values=values, allow_absent=True)
        if req.operator == "Exists":
            return cls(complement=True, allow_absent=False)
        if req.operator == "DoesNotExist":
            return cls(complement=False, allow_absent=True)
        if req.operator == "Gt":
            return cls(complement=True, gt=int(req.values[0]), allow_absent=False)
        if req.operator == "Lt":
            return cls(complement=True, lt=int(req.values[0]), allow_absent=False)
        raise ValueError(f"unknown operator {req.operator!r}")

    def _in_bounds(self, value: str) -> bool:
        if self.gt is None and self.lt is None:
            return True
        try:
            number = int(value)
        except ValueError:
            return False
        return (self.gt is None or number > self.gt) and (self.lt is None or number < self.lt)

    def contains(self, value: str) -> bool:
        if self.complement:
            return value not in self.values and self._in_bounds(value)
        return value in self.values

    def any_value(self) -> bool:
        """Whether some label value satisfies this set."""
        if not self.complement:
            return bool(self.values)
        if self.gt is not None and self.lt is not None:
            return self.lt - self.gt > 1
        return True

    def intersect(self, other: ValueSet) -> ValueSet:
        allow_absent = self.allow_absent and other.allow_absent
        if self.complement and other.complement:
            gt = max((b for b in (self.gt, other.gt) if b is not None), default=None)
            lt = min((b for b in (self.lt, other.lt) if b is not None), default=None)
            return ValueSet(True, self.values | other.values, gt, lt, allow_absent)
        finite, rest = (other, self) if self.complement else (self, other)
        values = frozenset(v for v in finite.values if rest.contains(v))
        return ValueSet(False, values, None, None, allow_absent)

    def describe(self) -> str:
        if not self.complement:
            return "[" + " ".join(sorted(self.values)) + "]" if self.values else "DoesNotExist"
        parts = [f"NotIn [{' '.join(sorted(self.values))}]"] if self.values else []
        parts += [f"Gt {self.gt}"] if self.gt is not None else []
        parts += [f"Lt {self.lt}"] if self.lt is not None else []
        return " ".join(parts) or "Exists"


ANY = ValueSet()


@dataclass(frozen=True)
class Requirements:
    """Immutable, hashable key -> ValueSet map; a key not present is unconstrained."""

    items: tuple[tuple[str, ValueSet], ...] = ()
    #: The object in memo keys (memo.py); not part of its value.
    serial: int = field(default_factory=serial, init=False, compare=False, repr=False)

    @classmethod
    def of(cls, mapping: Mapping[str, ValueSet]) -> Requirements:
        return cls(tuple(sorted(mapping.items())))

    @classmethod
    def from_requirements(cls, reqs: Iterable[Requirement]) -> Requirements:
        result: dict[str, ValueSet] = {}
        for req in reqs:
            key = wk.normalize_key(req.key)
            value_set = ValueSet.of(req)
            result[key] = result[key].intersect(value_set) if key in result else value_set
        return cls.of(result)

    @classmethod
    def from_labels(cls, labels: Mapping[str, str]) -> Requirements:
        return cls.of(
            {
                wk.normalize_key(k): ValueSet(False, frozenset({v}), allow_absent=False)
                for k, v in labels.items()
            }
        )

    def as_dict(self) -> dict[str, ValueSet]:
        return dict(self.items)

    def __iter__(self) -> Iterator[tuple[str, ValueSet]]:
        return iter(self.items)

    def keys(self) -> frozenset[str]:
        return frozenset(k for k, _ in self.items)

    def get(self, key: str) -> ValueSet:
        for k, value_set in self.items:
            if k == key:
                return value_set
        return ANY

    def allows(self, key: str, value: str) -> bool:
        return self.get(key).contains(value)

    def intersect(self, other: Requirements) -> Requirements:
        if not other.items:
            return self
        if not self.items:
            return other
        merged = self.as_dict()
        for key, value_set in other.items:
            merged[key] = merged[key].intersect(value_set) if key in merged else value_set
        return Requirements.of(merged)

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a node with exactly these labels satisfies every requirement."""
        for key, value_set in self.items:
            value = labels.get(key)
            if value is None:
                if not value_set.allow_absent:
                    return False
            elif not value_set.contains(value):
                return False
        return True

    def conflict(self, defined_keys: Iterable[str] = ()) -> str | None:
        """Why no node can satisfy these requirements, or None.

        Well-known keys are always labelled on a node, so they need a value; other keys need one
        only when required, and then only a key the node will carry (`defined_keys`) can give it.
        Instance-type labels (karpenter.k8s.aws/*) come with the type: the candidate types decide.
        """
        defined = {*defined_keys, *wk.WELL_KNOWN_LABELS, *wk.INSTANCE_TYPE_LABELS, *wk.RESERVATION_LABELS}
        for key, value_set in self.items:
            needs_value = key in wk.WELL_KNOWN_LABELS or not value_set.allow_absent
            if needs_value and not value_set.any_value():
                return f"no value of {key} satisfies {value_set.describe()}"
            if needs_value and key not in defined:
                return f"label {key} is required but no provisioner sets it"
        return None

    def single_values(self) -> dict[str, str]:
        """Keys narrowed to exactly one value (these become node labels)."""
        return {k: next(iter(v.values)) for k, v in self.items if not v.complement and len(v.values) == 1}

    def describe(self) -> str:
        return ", ".join(f"{k} {v.describe()}" for k, v in self.items)
