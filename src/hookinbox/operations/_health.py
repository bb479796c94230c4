"""`hookinbox status --check`: thresholds, and one line per breached one."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from hookinbox._model import Status
from hookinbox.storage import OpenFigures


@dataclass(frozen=True, slots=True)
class Thresholds:
    """A check fails when a figure goes over its threshold."""

    max_failed: int = 0
    max_oldest_pending: timedelta = timedelta(minutes=15)
    max_not_ready_deadline: int = 0
    max_stale: int = 0
    max_outbox_failed: int = 0


def breaches(figures: OpenFigures, now: datetime, thresholds: Thresholds) -> list[str]:
    found: list[str] = []
    failed = figures.count(Status.FAILED)
    if failed > thresholds.max_failed:
        found.append(f"failed events: {failed} (threshold {thresholds.max_failed})")
    if figures.oldest_pending is not None:
        age = now - figures.oldest_pending
        if age > thresholds.max_oldest_pending:
            found.append(
                f"oldest pending event is {_minutes(age)} old "
                f"(threshold {_minutes(thresholds.max_oldest_pending)})"
            )
    if figures.not_ready_deadline > thresholds.max_not_ready_deadline:
        found.append(
            f"events past their NotReady deadline: {figures.not_ready_deadline} "
            f"(threshold {thresholds.max_not_ready_deadline})"
        )
    stale = figures.count(Status.STALE)
    if stale > thresholds.max_stale:
        found.append(
            f"stale events held for an operator: {stale} (threshold {thresholds.max_stale})"
        )
    outbox_failed = figures.outbox.get("failed", 0)
    if outbox_failed > thresholds.max_outbox_failed:
        limit = thresholds.max_outbox_failed
        found.append(f"failed outbox messages: {outbox_failed} (threshold {limit})")
    return found


def _minutes(duration: timedelta) -> str:
    return f"{duration.total_seconds() / 60:.1f} min"
