"""Reconcile inside the worker (`hookinbox worker --reconcile-every 1h`): one run per period
and source across every process, each source on a clock of its own.

Each source that can reconcile has a thread of its own (`PeriodicReconcile`), so a source
whose API hangs or pages slowly holds up no other: each run is bounded by its own `Limits`
(a deadline per request and per run, a page cap), and until it ends only that source waits.
The run of a period is claimed in the database per source, as the daily pruner's day is (a
compare-and-set on the source's row of `hookinbox_jobs`, `Operations.claim_job`): of all
the workers on the database, one runs it, the others see it claimed. A run that outlasts its
period can overlap the next one's (another worker claims it); that only lists again, since
the insert decides what is stored. Each run logs one line with its counts; a run that found
missing events logs a warning (deliveries were lost upstream), as does one whose API listed
what was not asked for; a failing API (or a limit reached) an error, and the next period
tries again.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from hookinbox._errors import HookinboxError
from hookinbox._logging import logger
from hookinbox._operations._reconcile import Reconciled
from hookinbox.sources._base import Source
from hookinbox.sources._provider_api import Limits

if TYPE_CHECKING:
    from hookinbox._operations._service import Operations

log = logger("hookinbox.reconcile")

JOB_PREFIX = "reconcile:"
JOB_NAME_LENGTH = 64
"""`hookinbox_jobs.name`'s length: a longer source name is named by its digest."""
SINCE = timedelta(days=3)
"""What each run lists: Stripe's automatic retries last 3 days, GitHub keeps 3 days."""
MAX_CHECK_INTERVAL = 60.0
STOP_JOIN = 5.0
"""Seconds `stop()` waits for a run to notice it: a request in flight is given up at once."""
_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)

SourceTakes = Callable[[str, str | None], bool]
"""Whether a handler takes events of this type from this source."""


def current_period(now: datetime, every: timedelta) -> datetime:
    """The start of the period `now` is in (periods counted from a fixed epoch, so every
    process agrees)."""
    return _EPOCH + ((now - _EPOCH) // every) * every


def job_name(source: str) -> str:
    """The `hookinbox_jobs` row that claims `source`'s periods."""
    name = JOB_PREFIX + source
    if len(name) <= JOB_NAME_LENGTH:
        return name
    digest = hashlib.sha256(source.encode()).hexdigest()
    return JOB_PREFIX + digest[: JOB_NAME_LENGTH - len(JOB_PREFIX)]


class PeriodicReconcile(threading.Thread):
    """Reconciles `source` once per `every`, across all processes sharing the database."""

    def __init__(
        self,
        operations: Operations,
        source: Source,
        takes: SourceTakes,
        *,
        every: timedelta,
        clock: Callable[[], datetime],
        limits: Limits | None = None,
    ) -> None:
        super().__init__(name=f"hookinbox-reconcile-{source.name}", daemon=True)
        self.operations = operations
        self.source = source
        self.takes = takes
        self.every = every
        self.clock = clock
        self.limits = limits or Limits()
        self._stop_event = threading.Event()

    def run_due(self) -> Reconciled | None:
        """Run the current period's reconcile if this process wins it; what it did (None when
        another process has the period, or the run failed)."""
        now = self.clock()
        name = job_name(self.source.name)
        if not self.operations.claim_job(name, current_period(now, self.every), now):
            return None
        source = self.source.name
        try:
            result = self.operations.reconcile(
                self.source, self.source.listing(), since=SINCE, now=now,
                takes=lambda event_type: self.takes(source, event_type), limits=self.limits,
                stop=self._stop_event,
            )  # fmt: skip
        except HookinboxError as error:
            if self._stop_event.is_set():  # the worker is stopping: the next period retries
                log.info("reconcile of %s stopped with the worker: %s", source, error)
                return None
            log.error("reconcile of %s failed: %s", source, error)
            self.operations.record_job_result(name, f"failed: {error}"[:1000])
            return None
        counts = ", ".join(f"{k} {v}" for k, v in result.shown().items())
        unasked = result.unasked_summary()
        if result.missing:
            log.warning("reconcile of %s found events that never arrived (deliveries were "
                        "lost upstream): %s", source, counts)  # fmt: skip
        else:
            log.info("reconciled %s: %s", source, counts)
        if unasked is not None:
            log.warning("reconcile of %s: %s", source, unasked)
        self.operations.record_job_result(name, f"{result.missing} missing")
        return result

    def stop(self) -> None:
        self._stop_event.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join(STOP_JOIN)

    def run(self) -> None:
        wait = min(MAX_CHECK_INTERVAL, self.every.total_seconds())
        while not self._stop_event.is_set():
            try:
                self.run_due()
            except HookinboxError as error:
                log.warning("cannot check the reconcile schedule of %s: %s", self.source.name,
                            error)  # fmt: skip
            self._stop_event.wait(wait)
