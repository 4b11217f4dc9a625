"""Kubernetes resource quantities ("500m", "1Gi", "2e3") as plain numbers.

CPU is kept in cores (float), everything else in base units (bytes, counts).
"""

from __future__ import annotations

import re

from kubernetes.utils.quantity import parse_quantity as _client_parse_quantity

#: Kubernetes' quantity grammar (apimachinery resource.Quantity). The client's parser computes the
#: value but is laxer than the apiserver (it takes "NaN", "Infinity", "1_000", "1 Gi"), so the text
#: is held to the grammar first.
_GRAMMAR = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?(?:Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?$")


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


def parse_quantity(value: str | int | float) -> float:
    """Parse a quantity into a float in base units; raises QuantityError with the offending text.

    The arithmetic is the Kubernetes client's `kubernetes.utils.parse_quantity` (a Decimal);
    karpy adds the grammar check, refuses negatives and returns a float.
    """
    if isinstance(value, bool):
        raise QuantityError(f"invalid quantity {value!r}")
    if isinstance(value, int | float):
        return float(value)
    text = str(value).strip()
    if not _GRAMMAR.match(text):
        raise QuantityError(f"invalid quantity {value!r}")
    try:
        result = _client_parse_quantity(text)
    except ValueError as err:
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
