"""What every marshmallow schema in extender.api shares: how values are quoted in messages, how
choices are listed, and the lenient base schema (unknown fields ignored, as the apiserver prunes)."""

from __future__ import annotations

from marshmallow import EXCLUDE, Schema


def quote(value: object) -> str:
    # ASCII-escaped so odd unicode in user input cannot garble the message.
    text = str(value)
    return '"' + (text if text.isascii() else text.encode("unicode_escape").decode("ascii")) + '"'


def choices(options: tuple[str, ...]) -> str:
    return "[" + " ".join(options) + "]"


class Base(Schema):
    class Meta:
        unknown = EXCLUDE
