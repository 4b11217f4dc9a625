"""Deadlines at the edge of the calendar: a time plus a duration that datetime cannot hold.

A NodePool may carry a duration no clock reaches (`expireAfter: 99999999999h`: the CRD pattern
admits it, and objects stored before admission refused it stay). Python's datetime ends at
9999-12-31 and `timedelta` at 999,999,999 days, so `created + ttl` raises OverflowError. The clamp:
a deadline past `datetime.max` is "never" (None), which is what such a duration means in practice
(Go's time.Duration, what Karpenter reads it with, cannot hold it either). A duration that is not a
finite number is "never" too.
"""

from __future__ import annotations

from datetime import datetime, timedelta


def after(start: datetime, seconds: float) -> datetime | None:
    """`start + seconds`, or None ("never") when that lies beyond what datetime can hold."""
    try:
        return start + timedelta(seconds=seconds)
    except (OverflowError, ValueError):  # ValueError: NaN
        return None
