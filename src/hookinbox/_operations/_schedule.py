"""The daily pruner inside `serve` and `worker`: one run per day across every process.

Each worker checks once a minute whether the current daily slot (04:00 UTC by default) has
been run; the first to claim it in the database runs it (a compare-and-set on the job's row,
the same on SQLite and PostgreSQL), the others see it claimed and wait for tomorrow.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, time, timedelta
from typing import Protocol

from hookinbox._errors import ConfigurationError, HookinboxError
from hookinbox._logging import logger

log = logger("hookinbox.prune")

JOB_NAME = "prune"
CHECK_INTERVAL = 60.0
STOP_JOIN = 5.0
"""Seconds `stop()` waits for a run to notice it: a prune stops between two batches."""


def parse_daily_time(text: str) -> time:
    try:
        hours, minutes = (int(part) for part in text.split(":"))
        return time(hours, minutes, tzinfo=UTC)
    except ValueError as exc:
        raise ConfigurationError(f"not a time of day: {text!r} (use HH:MM, UTC)") from exc


def current_slot(now: datetime, at: time) -> datetime:
    """The most recent daily slot at or before `now`."""
    today = datetime.combine(now.date(), at.replace(tzinfo=UTC))
    return today if today <= now else today - timedelta(days=1)


class JobClaims(Protocol):
    """Where scheduled jobs are claimed, slot by slot (the operations service; a store's
    housekeeping gateway answers the same)."""

    def claim_job(self, name: str, slot: datetime, now: datetime) -> bool: ...

    def record_job_result(self, name: str, result: str) -> None: ...


class DailyJob(threading.Thread):
    """Runs `job(stop)` once per daily slot, across all processes sharing the database;
    `stop` is set when the worker stops, and the job ends at its next check of it."""

    def __init__(
        self,
        claims: JobClaims,
        job: Callable[[threading.Event], str],
        *,
        at: time,
        clock: Callable[[], datetime],
        name: str = JOB_NAME,
    ) -> None:
        super().__init__(name=f"hookinbox-{name}", daemon=True)
        self.claims = claims
        self.job = job
        self.at = at
        self.clock = clock
        self.job_name = name
        self._stop_event = threading.Event()

    def run_due(self) -> bool:
        """Run the job if this process wins the current slot; True if it ran."""
        now = self.clock()
        if not self.claims.claim_job(self.job_name, current_slot(now, self.at), now):
            return False
        try:
            result = self.job(self._stop_event)
        except HookinboxError as error:
            result = f"failed: {error}"
            log.error("scheduled %s failed: %s", self.job_name, error)
        self.claims.record_job_result(self.job_name, result)
        return True

    def stop(self) -> None:
        # Joined: a run still using the store after the worker returned would find its
        # engine disposed by the application's close (a connection left open).
        self._stop_event.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join(STOP_JOIN)

    def run(self) -> None:
        while not self._stop_event.is_set():
            try:
                self.run_due()
            except HookinboxError as error:
                log.warning("cannot check the %s schedule: %s", self.job_name, error)
            self._stop_event.wait(CHECK_INTERVAL)
