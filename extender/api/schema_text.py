"""What every marshmallow schema in extender.api shares: how values are quoted in messages, how
choices are listed, and the lenient base schema (unknown fields ignored, as the apiserver prunes)."""

from __future__ import annotations

from marshmallow import EXCLUDE, Schema

#: A value longer than this is cut in messages: a 1 MB label value must not come back as a 1 MB
#: denial (issue 26, found while probing).
QUOTED_CHARACTERS = 64


def quote(value: object) -> str:
    # ASCII-escaped so odd unicode in user input cannot garble the message.
    text = str(value)
    text = text if text.isascii() else text.encode("unicode_escape").decode("ascii")
    if len(text) > QUOTED_CHARACTERS:
        text = f"{text[:QUOTED_CHARACTERS]}... ({len(str(value))} characters)"
    return '"' + text + '"'


def choices(options: tuple[str, ...]) -> str:
    return "[" + " ".join(options) + "]"


class Base(Schema):
    class Meta:
        unknown = EXCLUDE
