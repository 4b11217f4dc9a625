"""What every marshmallow schema in extender.api shares: how values are quoted in messages, how
choices are listed, and the lenient base schema (unknown fields ignored, as the apiserver prunes)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from marshmallow import EXCLUDE, Schema, ValidationError, fields

#: A value longer than this is cut in messages: a 1 MB label value must not come back as a 1 MB
#: denial (issue 26, found while probing).
QUOTED_CHARACTERS = 64


def shorten(value: object) -> str:
    """`value` as text for a message: ASCII-escaped so odd unicode in user input cannot garble it,
    cut after QUOTED_CHARACTERS."""
    text = str(value)
    # Only the head is escaped: escaping a megabyte string to show 64 characters of it is waste.
    head = text[: QUOTED_CHARACTERS * 2]
    shown = head if head.isascii() else head.encode("unicode_escape", "backslashreplace").decode("ascii")
    if len(text) > QUOTED_CHARACTERS or len(shown) > QUOTED_CHARACTERS:
        return f"{shown[:QUOTED_CHARACTERS]}... ({len(text)} characters)"
    return shown


def quote(value: object) -> str:
    return '"' + shorten(value) + '"'


#: A denial lists this many problems in full; the rest are counted ("+N more").
SHOWN_PROBLEMS = 5
#: Each listed problem is cut (at a word boundary) after this many characters.
PROBLEM_CHARACTERS = 300


def _cut(line: str, limit: int) -> str:
    if len(line) <= limit:
        return line
    head = line[:limit]
    space = head.rfind(" ")
    return (head[:space] if space > limit // 2 else head).rstrip() + " ..."


def summarize(problems: Sequence[str]) -> str:
    """`path: message` lines as one bounded denial: the first SHOWN_PROBLEMS, each cut at a word
    boundary, then "+N more" (a 10,000-value requirement must not come back as a 10 MB message)."""
    shown = [_cut(str(line), PROBLEM_CHARACTERS) for line in problems[:SHOWN_PROBLEMS]]
    rest = len(problems) - len(shown)
    return "; ".join(shown) + (f"; +{rest} more" if rest > 0 else "")


def choices(options: tuple[str, ...]) -> str:
    return "[" + " ".join(options) + "]"


class Base(Schema):
    class Meta:
        unknown = EXCLUDE


def too_many(count: int, maximum: int, what: str = "entries") -> str:
    return f"at most {maximum} {what} ({count} given)"


class BoundedList(fields.List[Any]):
    """A list whose length is checked before any item is loaded: a 100,000-item list costs one
    len(), not 100,000 nested loads and as many error lines."""

    def __init__(self, inner: Any, *, max_items: int, what: str = "entries", **kwargs: Any) -> None:
        super().__init__(inner, **kwargs)
        self.max_items, self.what = max_items, what

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> Any:
        if isinstance(value, list) and len(value) > self.max_items:
            raise ValidationError(too_many(len(value), self.max_items, self.what))
        return super()._deserialize(value, attr, data, **kwargs)


class BoundedDict(fields.Dict):
    """A map whose size is checked before any key is loaded (see BoundedList); `precheck` may
    refuse the raw map first with a better message (a tag count, an annotation size)."""

    def __init__(
        self,
        *,
        max_items: int,
        what: str = "entries",
        precheck: Callable[[Mapping[Any, Any]], str | None] | None = None,
        values: fields.Field[Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(keys=fields.String(), values=values or fields.String(), **kwargs)
        self.max_items, self.what, self.precheck = max_items, what, precheck

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> Any:
        if isinstance(value, Mapping):
            if self.precheck is not None and (problem := self.precheck(value)) is not None:
                raise ValidationError(problem)
            if len(value) > self.max_items:
                raise ValidationError(too_many(len(value), self.max_items, self.what))
        return super()._deserialize(value, attr, data, **kwargs)  # type: ignore[no-untyped-call]
