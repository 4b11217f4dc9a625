"""Kubernetes resource quantities ("500m", "1Gi", "2e3") as plain numbers.

CPU is kept in cores (float), everything else in base units (bytes, counts).
"""

from __future__ import annotations

import re

from kubernetes.utils.quantity import parse_quantity as _client_parse_quantity

from extender.api.schema_text import quote

#: Kubernetes' quantity grammar (apimachinery resource.Quantity). The client's parser computes the
#: value but is laxer than the apiserver (it takes "NaN", "Infinity", "1_000", "1 Gi"), so the text
#: is held to the grammar first. Written so each character has one way to match (`\d+(\.\d*)?`, not
#: `\d+\.?\d*`, whose two digit runs made a failed match quadratic: 17 s for 16,000 digits), and
#: `[0-9]`, not `\d`, which takes every Unicode digit.
_GRAMMAR = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?(?:[KMGTPE]i|[numkMGTPE])?")
#: Text longer than this is refused before it is matched or converted: a real quantity is a few
#: dozen characters at most ("129.5Gi", "1e3", "500m").
MAX_LENGTH = 128


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
        try:
            return float(value)
        except OverflowError as err:  # an int past 1e308
            raise QuantityError(f"invalid quantity {quote(value)}") from err
    text = str(value).strip()
    if len(text) > MAX_LENGTH or not _GRAMMAR.fullmatch(text):
        raise QuantityError(f"invalid quantity {quote(value)}")
    try:
        result = _client_parse_quantity(text)
    except (ValueError, ArithmeticError) as err:  # decimal.Overflow for "1e99999999Ki"
        raise QuantityError(f"invalid quantity {quote(value)}") from err
    if result < 0:
        raise QuantityError(f"negative quantity {quote(value)}")
    return float(result)


def format_cpu(cores: float) -> str:
    millis = round(cores * 1000)
    return f"{millis // 1000}" if millis % 1000 == 0 else f"{millis}m"


def format_memory(num_bytes: float) -> str:
    for suffix, factor in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if num_bytes >= factor and num_bytes % factor == 0:
            return f"{int(num_bytes // factor)}{suffix}"
    return f"{int(num_bytes)}"
