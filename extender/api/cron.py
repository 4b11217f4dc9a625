"""Cron schedules as Karpenter reads a disruption budget's `schedule`: robfig/cron's standard parser.

Karpenter (pkg/apis/v1/nodepool.go `Budget.IsActive`) parses `TZ=UTC <schedule>` with
`cron.ParseStandard`: five fields (minute, hour, day of month, month, day of week) or a
descriptor (@yearly/@annually, @monthly, @weekly, @daily/@midnight, @hourly), always in UTC. The
rules here are robfig/cron v3's (parser.go `getRange`, spec.go `dayMatches`/`Next`): `*` and `?`,
`a-b`, `a/step` (= a-max/step), lists, month and weekday names (case-insensitive), day of week 0-6;
when day of month or day of week starts with `*`/`?` (and has no step above 1) both must match,
otherwise either may. `@every` is not accepted: Karpenter's CRD pattern forbids it.

Pure: parse once, ask `next_after(t)`; no clock. Parsing is linear in the text (splits and one
anchored, unambiguous pattern per term), and any text parses or raises CronError, nothing else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from extender.api import ranges
from extender.api.schema_text import shorten

#: robfig's search horizon: `Next` gives up (zero time) five years on.
YEAR_LIMIT = 5

_MONTHS = dict(jan=1, feb=2, mar=3, apr=4, may=5, jun=6, jul=7, aug=8, sep=9, oct=10, nov=11, dec=12)
_WEEKDAYS = dict(sun=0, mon=1, tue=2, wed=3, thu=4, fri=5, sat=6)
#: strconv.Atoi: an optional sign and ASCII digits, nothing else.
_INT = re.compile(r"[+-]?[0-9]+")

_DESCRIPTORS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


class CronError(ValueError):
    """A schedule robfig/cron's standard parser refuses; the message is its text."""


@dataclass(frozen=True)
class Bounds:
    low: int
    high: int
    names: dict[str, int] | None = None


MINUTES = Bounds(0, 59)
HOURS = Bounds(0, 23)
DOM = Bounds(1, 31)
MONTHS = Bounds(1, 12, _MONTHS)
DOW = Bounds(0, 6, _WEEKDAYS)


@dataclass(frozen=True)
class Field:
    values: frozenset[int]
    #: robfig's starBit: the field was `*`/`?` (without a step above 1).
    star: bool = False


def _int(text: str) -> int:
    if not _INT.fullmatch(text):
        raise CronError(f"failed to parse int from {shorten(text)}")
    if text.startswith("-"):
        raise CronError(f"negative number not allowed: {shorten(text)}")
    # Any value above a field's maximum is refused by the caller; digits past int64's are refused
    # here, before int() (which refuses 4300 digits with a ValueError), as Go's Atoi refuses them.
    number = ranges.bounded_int(text.lstrip("+"), ranges.MAX_INT64)
    if number is None:
        raise CronError(f"failed to parse int from {shorten(text)}: value out of range")
    return number


def _int_or_name(text: str, names: dict[str, int] | None) -> int:
    if names is not None and text.lower() in names:
        return names[text.lower()]
    return _int(text)


def parse_range(expr: str, bounds: Bounds) -> Field:
    """One comma-free term: `*`, `?`, `n`, `a-b`, each with an optional `/step`."""
    range_and_step = expr.split("/")
    low_and_high = range_and_step[0].split("-")
    star = False
    if low_and_high[0] in ("*", "?"):
        start, end, star = bounds.low, bounds.high, True
    else:
        start = _int_or_name(low_and_high[0], bounds.names)
        if len(low_and_high) == 1:
            end = start
        elif len(low_and_high) == 2:
            end = _int_or_name(low_and_high[1], bounds.names)
        else:
            raise CronError(f"too many hyphens: {shorten(expr)}")
    if len(range_and_step) == 1:
        step = 1
    elif len(range_and_step) == 2:
        step = _int(range_and_step[1])
        if len(low_and_high) == 1:  # "N/step" means "N-max/step"
            end = bounds.high
        if step > 1:
            star = False
    else:
        raise CronError(f"too many slashes: {shorten(expr)}")
    if start < bounds.low:
        raise CronError(f"beginning of range ({start}) below minimum ({bounds.low}): {shorten(expr)}")
    if end > bounds.high:
        raise CronError(f"end of range ({end}) above maximum ({bounds.high}): {shorten(expr)}")
    if start > end:
        raise CronError(f"beginning of range ({start}) beyond end of range ({end}): {shorten(expr)}")
    if step == 0:
        raise CronError(f"step of range should be a positive number: {shorten(expr)}")
    return Field(frozenset(range(start, end + 1, step)), star)


def parse_field(expr: str, bounds: Bounds) -> Field:
    """A comma-separated list of terms (robfig `getField`): the union, starred if any term is."""
    terms = [parse_range(term, bounds) for term in expr.split(",")]
    return Field(frozenset().union(*(t.values for t in terms)), any(t.star for t in terms))


@dataclass(frozen=True)
class Schedule:
    minute: Field
    hour: Field
    dom: Field
    month: Field
    dow: Field

    def day_matches(self, day: datetime) -> bool:
        dom_match = day.day in self.dom.values
        # Python's weekday() is Monday=0; cron's is Sunday=0.
        dow_match = (day.weekday() + 1) % 7 in self.dow.values
        if self.dom.star or self.dow.star:
            return dom_match and dow_match
        return dom_match or dow_match

    def next_after(self, t: datetime) -> datetime | None:
        """The first fire strictly after `t` (UTC, whole minutes); None if there is none within
        YEAR_LIMIT years (robfig returns the zero time)."""
        t = t.astimezone(UTC)
        start = t.replace(second=0, microsecond=0) + timedelta(minutes=1)
        limit = start.year + YEAR_LIMIT
        day = start.replace(hour=0, minute=0)
        while day.year <= limit:
            if day.month in self.month.values and self.day_matches(day):
                for hour in sorted(self.hour.values):
                    for minute in sorted(self.minute.values):
                        fire = day.replace(hour=hour, minute=minute)
                        if fire >= start:
                            return fire
            day += timedelta(days=1)
        return None


def parse(spec: str) -> Schedule:
    """robfig/cron `ParseStandard` (UTC): five fields or a descriptor; CronError with its message."""
    spec = spec.strip()
    if not spec:
        raise CronError("empty spec string")
    if spec.startswith("@"):
        if spec not in _DESCRIPTORS:
            raise CronError(f"unrecognized descriptor: {shorten(spec)}")
        spec = _DESCRIPTORS[spec]
    fields = spec.split()
    if len(fields) != 5:
        raise CronError(f"expected exactly 5 fields, found {len(fields)}: {shorten(spec)}")
    bounds = (MINUTES, HOURS, DOM, MONTHS, DOW)
    minute, hour, dom, month, dow = (parse_field(t, b) for t, b in zip(fields, bounds, strict=True))
    return Schedule(minute, hour, dom, month, dow)


def window_open(schedule: Schedule, duration_seconds: float, now: datetime) -> bool:
    """Karpenter's `Budget.IsActive`: the next fire after `now - duration` is not after `now`, i.e.
    `now` lies in [a fire, that fire + duration). No fire within the horizon counts as open, as
    robfig's zero time is "not after" any now."""
    fire = schedule.next_after(now - timedelta(seconds=duration_seconds))
    return fire is None or fire <= now
