"""extender/api/cron.py against robfig/cron v3's own tests (github.com/robfig/cron, parser_test.go
TestRange / TestField / TestParseScheduleErrors / TestStandardSpecSchedule, spec_test.go
TestActivation / TestNext), as Karpenter's `Budget.IsActive` uses it: `ParseStandard`, UTC, five
fields. Six-field cases (seconds) are ported where their seconds are 0, TZ/CRON_TZ ones are not
(Karpenter always parses in UTC)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from extender.api import cron
from extender.api.cron import Bounds, CronError, parse, parse_field, parse_range, window_open


@pytest.mark.parametrize(
    ("expr", "low", "high", "values", "star"),
    [
        ("5", 0, 7, {5}, False),
        ("0", 0, 7, {0}, False),
        ("7", 0, 7, {7}, False),
        ("5-5", 0, 7, {5}, False),
        ("5-6", 0, 7, {5, 6}, False),
        ("5-7", 0, 7, {5, 6, 7}, False),
        ("5-6/2", 0, 7, {5}, False),
        ("5-7/2", 0, 7, {5, 7}, False),
        ("5-7/1", 0, 7, {5, 6, 7}, False),
        ("*", 1, 3, {1, 2, 3}, True),
        ("*/2", 1, 3, {1, 3}, False),
    ],
)
def test_range(expr: str, low: int, high: int, values: set[int], star: bool) -> None:
    """robfig parser_test.go TestRange (the starBit is `star`)."""
    field = parse_range(expr, Bounds(low, high))
    assert (set(field.values), field.star) == (values, star)


@pytest.mark.parametrize(
    ("expr", "low", "high", "error"),
    [
        ("5--5", 0, 0, "too many hyphens"),
        ("jan-x", 0, 0, "failed to parse int from"),
        ("2-x", 1, 5, "failed to parse int from"),
        ("*/-12", 0, 0, "negative number"),
        ("*//2", 0, 0, "too many slashes"),
        ("1", 3, 5, "below minimum"),
        ("6", 3, 5, "above maximum"),
        ("5-3", 3, 5, "beyond end of range"),
        ("*/0", 0, 0, "should be a positive number"),
    ],
)
def test_range_errors(expr: str, low: int, high: int, error: str) -> None:
    """robfig parser_test.go TestRange, its error rows."""
    with pytest.raises(CronError, match=error):
        parse_range(expr, Bounds(low, high))


@pytest.mark.parametrize(
    ("expr", "values"),
    [("5", {5}), ("5,6", {5, 6}), ("5,6,7", {5, 6, 7}), ("1,5-7/2,3", {1, 5, 7, 3})],
)
def test_field(expr: str, values: set[int]) -> None:
    """robfig parser_test.go TestField."""
    assert set(parse_field(expr, Bounds(1, 7)).values) == values


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ("5 j * * *", "failed to parse int from"),
        ("* * * *", "expected exactly 5 fields"),
        ("", "empty spec string"),
        ("@unrecognized", "unrecognized descriptor"),
        # Karpenter's CRD pattern has no @every; robfig's standard parser would take it.
        ("@every 5m", "unrecognized descriptor"),
        ("* * * * 7", "above maximum"),
    ],
)
def test_parse_errors(spec: str, error: str) -> None:
    """robfig parser_test.go TestParseScheduleErrors / TestStandardSpecSchedule error rows."""
    with pytest.raises(CronError, match=error):
        parse(spec)


def test_standard_spec_and_descriptors() -> None:
    """robfig parser_test.go TestStandardSpecSchedule ("5 * * * *") and TestParseSchedule's
    descriptors (@midnight, @yearly, @annually: parseDescriptor's SpecSchedules)."""
    every5 = parse("5 * * * *")
    assert set(every5.minute.values) == {5} and every5.hour.star and every5.dom.star and every5.dow.star
    assert parse("@midnight") == parse("@daily") == parse("0 0 * * *")
    assert parse("@yearly") == parse("@annually") == parse("0 0 1 1 *")
    assert parse("@weekly") == parse("0 0 * * 0")
    assert parse("@monthly") == parse("0 0 1 * *")
    assert parse("@hourly") == parse("0 * * * *")


def at(text: str) -> datetime:
    """robfig spec_test.go getTime's "Mon Jul 9 15:00 2012" layout, in UTC."""
    for layout in ("%a %b %d %H:%M:%S %Y", "%a %b %d %H:%M %Y"):
        try:
            return datetime.strptime(text, layout).replace(tzinfo=UTC)
        except ValueError:
            continue
    raise ValueError(text)


@pytest.mark.parametrize(
    ("time", "spec", "fires"),
    [
        ("Mon Jul 9 15:00 2012", "0/15 * * * *", True),
        ("Mon Jul 9 15:45 2012", "0/15 * * * *", True),
        ("Mon Jul 9 15:40 2012", "0/15 * * * *", False),
        ("Mon Jul 9 15:05 2012", "5/15 * * * *", True),
        ("Mon Jul 9 15:20 2012", "5/15 * * * *", True),
        ("Mon Jul 9 15:50 2012", "5/15 * * * *", True),
        ("Sun Jul 15 15:00 2012", "0/15 * * Jul *", True),
        ("Sun Jul 15 15:00 2012", "0/15 * * Jun *", False),
        ("Sun Jul 15 08:30 2012", "30 08 ? Jul Sun", True),
        ("Sun Jul 15 08:30 2012", "30 08 15 Jul ?", True),
        ("Mon Jul 16 08:30 2012", "30 08 ? Jul Sun", False),
        ("Mon Jul 16 08:30 2012", "30 08 15 Jul ?", False),
        ("Mon Jul 9 15:00 2012", "@hourly", True),
        ("Mon Jul 9 15:04 2012", "@hourly", False),
        ("Mon Jul 9 15:00 2012", "@daily", False),
        ("Mon Jul 9 00:00 2012", "@daily", True),
        ("Mon Jul 9 00:00 2012", "@weekly", False),
        ("Sun Jul 8 00:00 2012", "@weekly", True),
        ("Sun Jul 8 01:00 2012", "@weekly", False),
        ("Sun Jul 8 00:00 2012", "@monthly", False),
        ("Sun Jul 1 00:00 2012", "@monthly", True),
        # Both day fields restricted: either may match.
        ("Sun Jul 15 00:00 2012", "* * 1,15 * Sun", True),
        ("Fri Jun 15 00:00 2012", "* * 1,15 * Sun", True),
        ("Wed Aug 1 00:00 2012", "* * 1,15 * Sun", True),
        ("Sun Jul 15 00:00 2012", "* * */10 * Sun", True),
        # One starred: both must match.
        ("Sun Jul 15 00:00 2012", "* * * * Mon", False),
        ("Mon Jul 9 00:00 2012", "* * 1,15 * *", False),
        ("Sun Jul 15 00:00 2012", "* * 1,15 * *", True),
        ("Sun Jul 15 00:00 2012", "* * */2 * Sun", True),
    ],
)
def test_activation(time: str, spec: str, fires: bool) -> None:
    """robfig spec_test.go TestActivation: Next(t - 1s) == t exactly when the spec fires at t."""
    t = at(time)
    assert (parse(spec).next_after(t - timedelta(seconds=1)) == t) is fires


@pytest.mark.parametrize(
    ("time", "spec", "expected"),
    [
        ("Mon Jul 9 14:45 2012", "0/15 * * * *", "Mon Jul 9 15:00 2012"),
        ("Mon Jul 9 14:59 2012", "0/15 * * * *", "Mon Jul 9 15:00 2012"),
        ("Mon Jul 9 14:59:59 2012", "0/15 * * * *", "Mon Jul 9 15:00 2012"),
        ("Mon Jul 9 15:45 2012", "20-35/15 * * * *", "Mon Jul 9 16:20 2012"),
        ("Mon Jul 9 23:46 2012", "*/15 * * * *", "Tue Jul 10 00:00 2012"),
        ("Mon Jul 9 23:45 2012", "20-35/15 * * * *", "Tue Jul 10 00:20 2012"),
        ("Mon Jul 9 23:35 2012", "0 0 9 Apr-Oct ?", "Thu Aug 9 00:00 2012"),
        ("Mon Jul 9 23:35 2012", "0 0 */5 Apr,Aug,Oct Mon", "Tue Aug 1 00:00 2012"),
        ("Mon Jul 9 23:35 2012", "0 0 */5 Oct Mon", "Mon Oct 1 00:00 2012"),
        ("Mon Jul 9 23:35 2012", "0 0 * Feb Mon", "Mon Feb 4 00:00 2013"),
        ("Mon Jul 9 23:35 2012", "0 0 * Feb Mon/2", "Fri Feb 1 00:00 2013"),
        ("Mon Dec 31 23:59:45 2012", "* * * * *", "Tue Jan 1 00:00:00 2013"),
        ("Mon Jul 9 23:35 2012", "0 0 29 Feb ?", "Mon Feb 29 00:00 2016"),
    ],
)
def test_next(time: str, spec: str, expected: str) -> None:
    """robfig spec_test.go TestNext, its UTC rows with seconds 0 (six fields less the first)."""
    assert parse(spec).next_after(at(time)) == at(expected)


@pytest.mark.parametrize("spec", ["0 0 30 Feb ?", "0 0 31 Apr ?"])
def test_next_unsatisfiable(spec: str) -> None:
    """robfig spec_test.go TestNext "Unsatisfiable": the zero time, here None."""
    assert parse(spec).next_after(at("Mon Jul 9 23:35 2012")) is None


def test_window_is_last_fire_plus_duration() -> None:
    """Karpenter pkg/apis/v1/nodepool.go Budget.IsActive: Next(now - duration) <= now, so the window
    is [fire, fire + duration): open at 00:00 and 00:09:59, closed at 00:10 and 23:59."""
    daily = parse("@daily")
    day = datetime(2024, 3, 1, tzinfo=UTC)
    assert window_open(daily, 600, day)
    assert window_open(daily, 600, day + timedelta(minutes=9, seconds=59))
    assert not window_open(daily, 600, day + timedelta(minutes=10))
    assert not window_open(daily, 600, day - timedelta(minutes=1))
    # an unsatisfiable spec: robfig's zero time is "not after" now, so Karpenter counts it active
    assert window_open(parse("0 0 30 Feb *"), 600, day)
    assert cron.YEAR_LIMIT == 5
