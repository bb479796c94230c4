"""Operations: retention and its schedule, health thresholds."""

from hookinbox._operations._health import THRESHOLD_ENV, Thresholds, breached_figures, breaches
from hookinbox._operations._prune import (
    DEFAULT_RETENTION,
    PruneResult,
    check_retention,
    format_duration,
    parse_duration,
    prune,
)
from hookinbox._operations._schedule import DailyJob, current_slot, parse_daily_time
from hookinbox._operations._times import parse_time, time_ago

__all__ = [
    "DEFAULT_RETENTION",
    "THRESHOLD_ENV",
    "DailyJob",
    "PruneResult",
    "Thresholds",
    "breached_figures",
    "breaches",
    "check_retention",
    "current_slot",
    "format_duration",
    "parse_daily_time",
    "parse_duration",
    "parse_time",
    "prune",
    "time_ago",
]
