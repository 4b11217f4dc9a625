"""Object metadata as Kubernetes writes it: RFC 3339 timestamps (creation, deletion, annotations)."""

from __future__ import annotations

from datetime import UTC, datetime


def parse_time(value: str | None) -> datetime | None:
    """`2026-01-01T12:00:00Z` -> an aware datetime; None for no value; raises ValueError for garbage."""
    if not value:
        return None
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def parse_time_or_none(value: object) -> datetime | None:
    """`parse_time` for fields the API server wrote: a value it could not have written reads as unset."""
    try:
        return parse_time(value) if isinstance(value, str) else None
    except ValueError:
        return None


def format_time(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
