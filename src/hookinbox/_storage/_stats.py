"""The figures gateway (`Store.stats`): read-only numbers for `hookinbox status`, its `--check`,
the Prometheus gauges and the dashboard.

Every figure read on a scrape or a health probe reads the queue's small table (the events that
are not done), the deliveries log by time, or a partial index of the outbox, so it stays cheap
when processed events number in the millions. The per-source counts of every event (`status`
without `--check`) scan the events: they are for an operator at a prompt, not for a monitor
every 15 seconds. Each method reads on the caller's connection, so that one report is one
snapshot; `gauges`, a scrape's, opens its own.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy import Connection

from hookinbox._model import WAITING_STATUSES, Status
from hookinbox._records import Bucket, DuplicateRatio, Gauges, OpenFigures, Report
from hookinbox._storage._rows import EVENT_STATUS
from hookinbox._storage._schema import deliveries, event_queue, events, status_is

if TYPE_CHECKING:
    from hookinbox._storage._liveness import Liveness
    from hookinbox._storage._outbox import Outbox
    from hookinbox._storage._seam import StoreSeam

NOT_READY_DEADLINE = "not_ready_deadline"
_HELD = event_queue.c.lease_token.is_not(None)
_STATE = sa.case((_HELD, sa.literal(Status.PROCESSING.value)), else_=event_queue.c.state)


class Stats:
    def __init__(self, store: StoreSeam, outbox: Outbox, liveness: Liveness) -> None:
        self.store = store
        # The open figures include the outbox's backlog and the live workers: their gateways'.
        self._outbox = outbox
        self._liveness = liveness

    def open_figures(self, connection: Connection, now: datetime) -> OpenFigures:
        """What is waiting, held, stuck or failed: all from the queue's table."""
        q = event_queue.c
        by_status = {
            str(state): int(count)
            for state, count in connection.execute(
                sa.select(_STATE, sa.func.count()).group_by(_STATE)
            )
        }
        oldest_pending = connection.execute(
            sa.select(sa.func.min(q.received_at)).where(status_is(q.state, Status.PENDING.value))
        ).scalar()
        oldest_deferred = connection.execute(
            sa.select(sa.func.min(events.c.deferred_since))
            .select_from(event_queue.join(events, events.c.id == q.id))
            .where(status_is(q.state, Status.DEFERRED.value))
        ).scalar()
        deadline_failures = connection.execute(
            sa.select(sa.func.count())
            .select_from(event_queue.join(events, events.c.id == q.id))
            .where(status_is(q.state, Status.FAILED.value), events.c.outcome == NOT_READY_DEADLINE)
        ).scalar_one()
        return OpenFigures(
            by_status,
            oldest_pending,
            oldest_deferred,
            int(deadline_failures),
            self._outbox.backlog(connection),
            self._liveness.live(connection),
        )

    def duplicate_ratio(
        self, connection: Connection, since: datetime | None, until: datetime | None = None
    ) -> DuplicateRatio:
        query = sa.select(
            sa.func.count(),
            sa.func.coalesce(sa.func.sum(sa.cast(deliveries.c.duplicate, sa.Integer)), 0),
        )
        if since is not None:
            query = query.where(deliveries.c.received_at >= since)
        if until is not None:
            query = query.where(deliveries.c.received_at < until)
        row = connection.execute(query).one()
        return DuplicateRatio(int(row[0]), int(row[1]))

    def counts_by_source(self, connection: Connection) -> dict[tuple[str, str], int]:
        """(source, status) -> events; a scan of the events (an operator's, not a monitor's)."""
        status = EVENT_STATUS.element  # processing while held, paused while parked
        rows = connection.execute(
            sa.select(events.c.source, status, sa.func.count())
            .select_from(events.outerjoin(event_queue, event_queue.c.id == events.c.id))
            .group_by(events.c.source, status)
        )
        return {(source, status): int(count) for source, status, count in rows}

    def report(self, connection: Connection, now: datetime, *, full: bool = True) -> Report:
        windows = {"last hour": now - timedelta(hours=1), "last day": now - timedelta(days=1)}
        ratios = {name: self.duplicate_ratio(connection, since) for name, since in windows.items()}
        if full:
            ratios["all"] = self.duplicate_ratio(connection, None)
        return Report(
            open=self.open_figures(connection, now),
            counts=self.counts_by_source(connection) if full else {},
            duplicates=ratios,
        )

    def gauges(self, now: datetime) -> Gauges:
        """The figures of a metrics scrape, read in one transaction of their own: the open
        figures, then the duplicate ratio over the last hour and the last day."""
        with self.store.reading() as connection:
            return Gauges(
                self.open_figures(connection, now),
                self.duplicate_ratio(connection, now - timedelta(hours=1)),
                self.duplicate_ratio(connection, now - timedelta(days=1)),
            )

    def waiting_count(self, connection: Connection) -> int:
        waiting = [s.value for s in WAITING_STATUSES]
        query = sa.select(sa.func.count()).where(status_is(event_queue.c.state, *waiting))
        return int(connection.execute(query).scalar_one())

    def activity(
        self, connection: Connection, start: datetime, width: timedelta, buckets: int
    ) -> dict[str, list[Bucket]]:
        """Per source, per bucket from `start`: deliveries, duplicates and failed events.

        Two grouped range reads (the deliveries log by its received_at index, the failed
        events in the queue's open index), whatever the number of buckets: the bucket is
        computed in the database.
        """
        dialect = self.store.dialect
        end = start + width * buckets
        found: dict[str, dict[int, dict[str, int]]] = {}
        log_bucket = dialect.time_bucket(deliveries.c.received_at, start, width)
        rows = connection.execute(
            sa.select(
                deliveries.c.source,
                log_bucket,
                sa.func.count(),
                sa.func.coalesce(sa.func.sum(sa.cast(deliveries.c.duplicate, sa.Integer)), 0),
            )
            .where(deliveries.c.received_at >= start, deliveries.c.received_at < end)
            .group_by(deliveries.c.source, log_bucket)
        )
        for source, index, count, duplicates in rows:
            figures = found.setdefault(source, {}).setdefault(int(index), {})
            figures["deliveries"], figures["duplicates"] = int(count), int(duplicates)
        q = event_queue.c
        event_bucket = dialect.time_bucket(q.received_at, start, width)
        rows = connection.execute(
            sa.select(events.c.source, event_bucket, sa.func.count())
            .select_from(event_queue.join(events, events.c.id == q.id))
            .where(
                status_is(q.state, Status.FAILED.value),
                q.received_at >= start,
                q.received_at < end,
            )
            .group_by(events.c.source, event_bucket)
        )
        for source, index, count in rows:
            found.setdefault(source, {}).setdefault(int(index), {})["failed"] = int(count)
        return {
            source: [Bucket(**by_index.get(i, {})) for i in range(buckets)]
            for source, by_index in sorted(found.items())
        }
