"""Times typed by an operator: `1h` / `2d` (that long ago) or an ISO 8601 time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hookinbox._errors import ConfigurationError
from hookinbox._operations._prune import parse_duration


def time_ago(now: datetime, duration: timedelta, text: str) -> datetime:
    """`duration` before `now`; one reaching outside the calendar is a usage error."""
    try:
        return now - duration
    except OverflowError:
        raise ConfigurationError(f"{text!r} reaches outside the calendar") from None


def parse_time(text: str, now: datetime) -> datetime:
    """`1h`, `2d` (that long before `now`) or an ISO 8601 time (UTC unless it says otherwise)."""
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return time_ago(now, parse_duration(text), text)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
