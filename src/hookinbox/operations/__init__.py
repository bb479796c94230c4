"""Operations: retention and its schedule, health thresholds."""

from hookinbox.operations._health import Thresholds, breaches
from hookinbox.operations._prune import (
    DEFAULT_RETENTION,
    PruneResult,
    check_retention,
    format_duration,
    parse_duration,
    prune,
)
from hookinbox.operations._schedule import DailyJob, current_slot, parse_daily_time

__all__ = [
    "DEFAULT_RETENTION",
    "DailyJob",
    "PruneResult",
    "Thresholds",
    "breaches",
    "check_retention",
    "current_slot",
    "format_duration",
    "parse_daily_time",
    "parse_duration",
    "prune",
]
