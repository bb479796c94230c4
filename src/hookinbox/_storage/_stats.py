"""Read-only figures for `hookinbox status`, its `--check`, and the Prometheus gauges.

The live workers come from their heartbeats (`_workers.py`).

Every query that runs on a scrape or a health probe reads a partial index (`due`, `open`) or
the deliveries log by time, so it stays cheap when processed events number in the millions.
The per-source counts of done events (`status` without `--check`) scan the table: they are
for an operator at a prompt, not for a monitor every 15 seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy import Connection

from hookinbox._model import DONE_STATUSES, WAITING_STATUSES, Status
from hookinbox._storage._dialects import dialect_named
from hookinbox._storage._outbox import outbox_backlog
from hookinbox._storage._schema import (
    deliveries,
    events,
    open_event_status,
    status_is,
    status_not,
)
from hookinbox._storage._workers import live_workers

NOT_READY_DEADLINE = "not_ready_deadline"
HOUR = timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class DuplicateRatio:
    deliveries: int
    duplicates: int

    @property
    def ratio(self) -> float:
        return self.duplicates / self.deliveries if self.deliveries else 0.0


@dataclass(frozen=True, slots=True)
class OpenFigures:
    """The cheap figures: what is waiting, stuck or failed (all from the `open` index)."""

    by_status: dict[str, int]
    oldest_pending: datetime | None
    oldest_deferred: datetime | None
    not_ready_deadline: int
    outbox: dict[str, int] = field(default_factory=dict)
    """Outbox messages not delivered, by status (pending, delivering, failed)."""
    workers: dict[tuple[str, str], int] = field(default_factory=dict)
    """(host, kind) -> live processes: workers and relays whose heartbeat has not expired."""

    def live(self, kind: str) -> int:
        """Live processes of `kind` (worker, relay) on every host."""
        return sum(count for (_, k), count in self.workers.items() if k == kind)

    def count(self, status: Status) -> int:
        return self.by_status.get(status.value, 0)


@dataclass(frozen=True, slots=True)
class Report:
    """Everything `hookinbox status` shows."""

    open: OpenFigures
    counts: dict[tuple[str, str], int] = field(default_factory=dict)
    """(source, status) -> events."""
    duplicates: dict[str, DuplicateRatio] = field(default_factory=dict)
    """"last hour", "last day", "all" -> ratio."""


def open_figures(connection: Connection, now: datetime) -> OpenFigures:
    done = [s.value for s in DONE_STATUSES]
    by_status = {
        status: count
        for status, count in connection.execute(
            sa.select(events.c.status, sa.func.count())
            .where(status_not(events.c.status, *done))
            .group_by(events.c.status)
        )
    }
    oldest = sa.select(sa.func.min(events.c.received_at))
    oldest_pending = connection.execute(
        oldest.where(open_event_status(Status.PENDING.value, Status.PROCESSING.value))
    ).scalar()
    oldest_deferred = connection.execute(
        sa.select(sa.func.min(events.c.deferred_since)).where(
            open_event_status(Status.DEFERRED.value)
        )
    ).scalar()
    deadline_failures = connection.execute(
        sa.select(sa.func.count()).where(
            open_event_status(Status.FAILED.value), events.c.outcome == NOT_READY_DEADLINE
        )
    ).scalar_one()
    return OpenFigures(
        by_status,
        oldest_pending,
        oldest_deferred,
        int(deadline_failures),
        outbox_backlog(connection),
        live_workers(connection, now),
    )


def duplicate_ratio(
    connection: Connection, since: datetime | None, until: datetime | None = None
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
    total, duplicates = row[0], row[1]
    return DuplicateRatio(int(total), int(duplicates))


def counts_by_source(connection: Connection) -> dict[tuple[str, str], int]:
    rows = connection.execute(
        sa.select(events.c.source, events.c.status, sa.func.count()).group_by(
            events.c.source, events.c.status
        )
    )
    return {(source, status): int(count) for source, status, count in rows}


def report(connection: Connection, now: datetime, *, full: bool = True) -> Report:
    windows = {"last hour": now - timedelta(hours=1), "last day": now - timedelta(days=1)}
    ratios = {name: duplicate_ratio(connection, since) for name, since in windows.items()}
    if full:
        ratios["all"] = duplicate_ratio(connection, None)
    return Report(
        open=open_figures(connection, now),
        counts=counts_by_source(connection) if full else {},
        duplicates=ratios,
    )


def waiting_count(connection: Connection) -> int:
    waiting = [s.value for s in WAITING_STATUSES]
    return int(
        connection.execute(
            sa.select(sa.func.count()).where(status_is(events.c.status, *waiting))
        ).scalar_one()
    )


@dataclass(frozen=True, slots=True)
class Bucket:
    """One source's figures in one time bucket of `activity`."""

    deliveries: int = 0
    duplicates: int = 0
    failed: int = 0
    """Events received in the bucket that are failed now."""

    @property
    def duplicate_ratio(self) -> float:
        return self.duplicates / self.deliveries if self.deliveries else 0.0


def activity(
    connection: Connection, start: datetime, width: timedelta, buckets: int
) -> dict[str, list[Bucket]]:
    dialect = dialect_named(connection.dialect.name)
    """Per source, per bucket from `start`: deliveries, duplicates and failed events.

    Two grouped range reads (the deliveries log and the events, by their received_at
    indexes), whatever the number of buckets: the bucket is computed in the database.
    """
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
    event_bucket = dialect.time_bucket(events.c.received_at, start, width)
    rows = connection.execute(
        sa.select(events.c.source, event_bucket, sa.func.count())
        .where(
            open_event_status(Status.FAILED.value),
            events.c.received_at >= start,
            events.c.received_at < end,
        )
        .group_by(events.c.source, event_bucket)
    )
    for source, index, count in rows:
        found.setdefault(source, {}).setdefault(int(index), {})["failed"] = int(count)
    return {
        source: [Bucket(**by_index.get(i, {})) for i in range(buckets)]
        for source, by_index in sorted(found.items())
    }
