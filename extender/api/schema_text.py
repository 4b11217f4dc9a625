"""What every marshmallow schema in extender.api shares: how values are quoted in messages, how
choices are listed, and the lenient base schema (unknown fields ignored, as the apiserver prunes)."""

from __future__ import annotations

from collections.abc import Sequence

from marshmallow import EXCLUDE, Schema

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
