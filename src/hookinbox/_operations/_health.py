"""`hookinbox status --check`: thresholds, and one line per breached one."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from hookinbox import _ranges as ranges
from hookinbox._errors import ConfigurationError
from hookinbox._model import Status
from hookinbox._operations._prune import parse_duration
from hookinbox._records import OpenFigures

THRESHOLD_ENV = {
    "max_failed": "HOOKINBOX_MAX_FAILED",
    "max_oldest_pending": "HOOKINBOX_MAX_PENDING_AGE",
    "max_not_ready_deadline": "HOOKINBOX_MAX_NOT_READY_DEADLINE",
    "max_stale": "HOOKINBOX_MAX_STALE",
    "max_outbox_failed": "HOOKINBOX_MAX_OUTBOX_FAILED",
    "min_workers": "HOOKINBOX_MIN_WORKERS",
}
"""The variables `status --check` reads its thresholds from; the dashboard reads the same."""


@dataclass(frozen=True, slots=True)
class Thresholds:
    """A check fails when a figure goes over its threshold."""

    max_failed: int = 0
    max_oldest_pending: timedelta = timedelta(minutes=15)
    max_not_ready_deadline: int = 0
    max_stale: int = 0
    max_outbox_failed: int = 0
    min_workers: int = 1
    """Live worker processes (heartbeats not expired, on every host) below which it fails; 0
    for an inbox that processes inline or has no worker on purpose."""

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] = os.environ) -> Thresholds:
        """The thresholds set by HOOKINBOX_MAX_* variables; the defaults for the others."""
        values: dict[str, int | timedelta] = {}
        for field_name, variable in THRESHOLD_ENV.items():
            text = environ.get(variable, "").strip()
            if not text:  # empty is unset, as click reads `status`'s variables
                continue
            if field_name == "max_oldest_pending":
                values[field_name] = parse_duration(text)
                continue
            # ASCII digits only: str.isdigit() took "²", which int() then refused (a traceback)
            number = int(text) if text.isascii() and text.isdecimal() else None
            if number is None or number not in ranges.THRESHOLD:
                raise ConfigurationError(
                    f"{variable} must be {ranges.THRESHOLD.describe()}, got {text!r}"
                )
            values[field_name] = number
        return cls(**values)  # type: ignore[arg-type]

    def __post_init__(self) -> None:
        for name in THRESHOLD_ENV.keys() - {"max_oldest_pending"}:
            ranges.THRESHOLD.check(name, getattr(self, name))
        pending = self.max_oldest_pending
        if not isinstance(pending, timedelta) or pending < timedelta(0):
            raise ConfigurationError(
                f"max_oldest_pending must be a timedelta, not negative, not {pending!r}"
            )


def breached_figures(figures: OpenFigures, now: datetime, thresholds: Thresholds) -> dict[str, str]:
    """Each breached figure (workers, failed, oldest_pending, not_ready_deadline, stale,
    outbox_failed) with the line that explains it: the dashboard marks the figure, `--check`
    prints the line."""
    found: dict[str, str] = {}
    live = figures.live("worker")
    if live < thresholds.min_workers:
        found["workers"] = (
            f"live workers: {live} (threshold: at least {thresholds.min_workers}; "
            "no heartbeat within 3 intervals)"
        )
    failed = figures.count(Status.FAILED)
    if failed > thresholds.max_failed:
        found["failed"] = f"failed events: {failed} (threshold {thresholds.max_failed})"
    if figures.oldest_pending is not None:
        age = now - figures.oldest_pending
        if age > thresholds.max_oldest_pending:
            found["oldest_pending"] = (
                f"oldest pending event is {_minutes(age)} old "
                f"(threshold {_minutes(thresholds.max_oldest_pending)})"
            )
    if figures.not_ready_deadline > thresholds.max_not_ready_deadline:
        found["not_ready_deadline"] = (
            f"events past their NotReady deadline: {figures.not_ready_deadline} "
            f"(threshold {thresholds.max_not_ready_deadline})"
        )
    stale = figures.count(Status.STALE)
    if stale > thresholds.max_stale:
        found["stale"] = (
            f"stale events held for an operator: {stale} (threshold {thresholds.max_stale})"
        )
    outbox_failed = figures.outbox.get("failed", 0)
    if outbox_failed > thresholds.max_outbox_failed:
        limit = thresholds.max_outbox_failed
        found["outbox_failed"] = f"failed outbox messages: {outbox_failed} (threshold {limit})"
    return found


def breaches(figures: OpenFigures, now: datetime, thresholds: Thresholds) -> list[str]:
    return list(breached_figures(figures, now, thresholds).values())


def _minutes(duration: timedelta) -> str:
    return f"{duration.total_seconds() / 60:.1f} min"
