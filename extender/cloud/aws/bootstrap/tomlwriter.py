"""A TOML writer for Bottlerocket settings (the standard library only reads TOML).

Tables become `[a.b]` sections; arrays and tables inside arrays are written inline, which TOML
reads back as the same values.
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Mapping
from typing import Any

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(key: str) -> str:
    return key if _BARE_KEY.match(key) else json.dumps(key, ensure_ascii=False)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def _table(table: Mapping[str, Any], path: list[str], lines: list[str]) -> None:
    scalars = {k: v for k, v in table.items() if not isinstance(v, Mapping)}
    tables = {k: v for k, v in table.items() if isinstance(v, Mapping)}
    if path and (scalars or not tables):
        lines.append(f"[{'.'.join(_key(p) for p in path)}]")
    lines.extend(f"{_key(k)} = {_value(v)}" for k, v in scalars.items())
    for key, sub in tables.items():
        _table(sub, [*path, key], lines)


def dumps(document: Mapping[str, Any]) -> str:
    lines: list[str] = []
    _table(document, [], lines)
    return "\n".join(lines) + "\n"
