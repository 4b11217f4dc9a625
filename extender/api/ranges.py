"""The one rule for the numbers karpy admits: every duration, count and quantity a NodePool,
EC2NodeClass or Provisioner gives either fits what karpy computes with, or is refused at admission
naming the field. Every schema checks its numbers here, so the maxima are stated once:

- Durations (expireAfter, terminationGracePeriod, consolidateAfter, a budget's duration, a
  Provisioner's ttlSeconds*, kubelet grace periods): at most Go's time.Duration maximum,
  (2**63 - 1) ns = 2562047h47m16.854775807s. Karpenter reads each of them with Go's
  time.ParseDuration (metav1.Duration, its NillableDuration), which refuses a larger one
  ("invalid duration"), so karpy refuses what Karpenter's own parser refuses. Within it the
  lifecycle's datetime arithmetic cannot overflow: now + 292 years is far below datetime's year 9999.
- Counts (a budget's nodes, kubelet maxPods, ...): at most 2**31 - 1, math.MaxInt32, the int32 an
  int-or-string count holds and Karpenter's "no budget applies".
- Integers compared as numbers (Gt/Lt requirement values): int64, the CEL int the CRD's rule
  converts them to.
- Quantities: finite and at most MAX_QUANTITY base units.

Text is measured before it is parsed: a number of more digits than its maximum has is refused
without converting it (Python refuses int() past 4300 digits, and the conversion is quadratic).
"""

from __future__ import annotations

import math

#: Go's time.Duration maximum in whole seconds: (2**63 - 1) ns.
MAX_DURATION_SECONDS = (2**63 - 1) // 10**9
MAX_DURATION_TEXT = "2562047h47m16s"
#: math.MaxInt32.
MAX_COUNT = 2**31 - 1
#: math.MaxInt64.
MAX_INT64 = 2**63 - 1
#: The largest quantity karpy takes, in base units (cores, bytes): far above any cluster's total.
MAX_QUANTITY = 1e15
#: A duration is a handful of number-unit pairs; longer text is refused before it is matched.
MAX_DURATION_LENGTH = 64


def seconds_problem(seconds: float) -> str | None:
    """Why `seconds` is no duration karpy computes with, or None."""
    if not 0 <= seconds <= MAX_DURATION_SECONDS:
        return f"must be between 0s and {MAX_DURATION_TEXT} (Go's largest duration)"
    return None


def count_problem(count: int, low: int = 0) -> str | None:
    if not low <= count <= MAX_COUNT:
        return f"must be between {low} and {MAX_COUNT}"
    return None


def quantity_problem(value: float) -> str | None:
    if not math.isfinite(value) or value > MAX_QUANTITY:
        return f"is larger than {MAX_QUANTITY:g}"
    return None


def bounded_int(digits: str, maximum: int) -> int | None:
    """An unsigned decimal integer of at most `maximum`, or None when it is larger: the number of
    digits is checked before converting, so a 10,000-digit text costs nothing."""
    significant = digits.lstrip("0")
    if len(significant) > len(str(maximum)):
        return None
    value = int(significant or "0")
    return value if value <= maximum else None
