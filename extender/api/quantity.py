"""Kubernetes resource quantities ("500m", "1Gi", "2e3") as plain numbers.

CPU is kept in cores (float), everything else in base units (bytes, counts).
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_SUFFIXES: dict[str, Decimal] = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}
_PATTERN = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]?)$")


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


def parse_quantity(value: str | int | float) -> float:
    """Parse a quantity into a float in base units; raises QuantityError with the offending text."""
    if isinstance(value, bool):
        raise QuantityError(f"invalid quantity {value!r}")
    if isinstance(value, int | float):
        return float(value)
    text = str(value).strip()
    match = _PATTERN.match(text)
    if not match:
        raise QuantityError(f"invalid quantity {value!r}")
    number, suffix = match.groups()
    try:
        result = Decimal(number) * _SUFFIXES[suffix]
    except InvalidOperation as err:
        raise QuantityError(f"invalid quantity {value!r}") from err
    if result < 0:
        raise QuantityError(f"negative quantity {value!r}")
    return float(result)


def format_cpu(cores: float) -> str:
    millis = round(cores * 1000)
    return f"{millis // 1000}" if millis % 1000 == 0 else f"{millis}m"


def format_memory(num_bytes: float) -> str:
    for suffix, factor in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if num_bytes >= factor and num_bytes % factor == 0:
            return f"{int(num_bytes // factor)}{suffix}"
    return f"{int(num_bytes)}"
