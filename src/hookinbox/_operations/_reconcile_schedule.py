"""Reconcile inside the worker (`hookinbox worker --reconcile-every 1h`): one run per period
across every process, each source that can reconcile in turn.

The run of a period is claimed in the database as the daily pruner's is (a compare-and-set on
the `reconcile` row of `hookinbox_jobs`, `Housekeeping.claim_job`): of all the workers on the
database, one runs it, the others see it claimed. A run that outlasts its period can overlap
the next one's (another worker claims it); that only lists again, since the insert decides
what is stored. Each run logs one line per source with its counts; a run that found missing
events logs a warning (deliveries were lost upstream), a failing API an error, and the next
period tries again.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from hookinbox._errors import HookinboxError
from hookinbox._logging import logger
from hookinbox._operations._reconcile import Reconciled, reconcile
from hookinbox._storage import Store
from hookinbox.sources._base import Source

log = logger("hookinbox.reconcile")

JOB_NAME = "reconcile"
SINCE = timedelta(days=3)
"""What each run lists: Stripe's automatic retries last 3 days, GitHub keeps 3 days."""
MAX_CHECK_INTERVAL = 60.0
_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)

SourceTakes = Callable[[str, str | None], bool]
"""Whether a handler takes events of this type from this source."""


def current_period(now: datetime, every: timedelta) -> datetime:
    """The start of the period `now` is in (periods counted from a fixed epoch, so every
    process agrees)."""
    return _EPOCH + ((now - _EPOCH) // every) * every


class PeriodicReconcile(threading.Thread):
    """Reconciles `sources` once per `every`, across all processes sharing the database."""

    def __init__(
        self,
        store: Store,
        sources: list[Source],
        takes: SourceTakes,
        *,
        every: timedelta,
        clock: Callable[[], datetime],
    ) -> None:
        super().__init__(name="hookinbox-reconcile", daemon=True)
        self.store = store
        self.sources = sources
        self.takes = takes
        self.every = every
        self.clock = clock
        self._stop_event = threading.Event()

    def run_due(self) -> list[Reconciled]:
        """Run the current period's reconcile if this process wins it; what each source did."""
        now = self.clock()
        if not self.store.housekeeping.claim_job(JOB_NAME, current_period(now, self.every), now):
            return []
        done: list[Reconciled] = []
        for source in self.sources:
            takes = functools.partial(self.takes, source.name)
            try:
                result = reconcile(
                    self.store, source, source.listing(), since=SINCE, now=now, takes=takes
                )
            except HookinboxError as error:
                log.error("reconcile of %s failed: %s", source.name, error)
                continue
            counts = ", ".join(f"{k} {v}" for k, v in result.counts().items())
            if result.missing:
                log.warning("reconcile of %s found events that never arrived (deliveries were "
                            "lost upstream): %s", source.name, counts)  # fmt: skip
            else:
                log.info("reconciled %s: %s", source.name, counts)
            done.append(result)
        self.store.housekeeping.record_job_result(
            JOB_NAME, "; ".join(f"{r.source}: {r.missing} missing" for r in done) or "nothing"
        )
        return done

    def stop(self) -> None:
        self._stop_event.set()

    def run(self) -> None:
        wait = min(MAX_CHECK_INTERVAL, self.every.total_seconds())
        while not self._stop_event.is_set():
            try:
                self.run_due()
            except HookinboxError as error:
                log.warning("cannot check the reconcile schedule: %s", error)
            self._stop_event.wait(wait)
