"""The housekeeping gateway (`Store.housekeeping`): retention (what a prune would delete, and
deleting it in short batches), the daily jobs' claims, and the space a prune frees.

Done events (processed, unhandled) older than the retention are pruned with their payloads
and delivered outbox messages; the delivery log by its own time. Pending, deferred,
processing, failed and stale events are never pruned, however old: they have queue rows, and
operators act on them.

A source may keep its events longer or shorter than the inbox (`Cutoffs`): below the earliest
cutoff every done event goes, one range of the received_at index as before; between the
earliest and the latest cutoff (the window) each batch reads the next rows of that range in
index order, at most a batch of them, and deletes those past their own source's cutoff, so a
batch holds the writer for a bounded time however many kept rows it steps over, and a prune
reads the window once, whatever the number of sources (`Sweep` remembers where it was).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy import Connection

from hookinbox._model import DONE_STATUSES, MessageStatus
from hookinbox._storage._pressure import PressureGauge
from hookinbox._storage._schema import (
    deliveries,
    events,
    jobs,
    metadata,
    outbox,
    payloads,
    schema_versions,
)

if TYPE_CHECKING:
    from hookinbox._storage._seam import StoreSeam


def prunable(cutoff: datetime) -> list[sa.ColumnElement[bool]]:
    """Done events received before `cutoff`."""
    return [events.c.status.in_([s.value for s in DONE_STATUSES]), events.c.received_at < cutoff]


def prunable_log(cutoff: datetime) -> list[sa.ColumnElement[bool]]:
    """Delivery log rows received before `cutoff`: the log is kept for the retention by its
    own time, whatever became of the event (a failed or stale event keeps its row, its
    counters and its audit trail; its deliveries older than the retention go). A look-up of
    each row's event would join the log to the events, and grew with the table (bench/
    README.md, growth); by its own time it is one range of one index."""
    return [deliveries.c.received_at < cutoff]


def prunable_messages(cutoff: datetime) -> list[sa.ColumnElement[bool]]:
    """Delivered outbox messages created before `cutoff`; unsent and failed ones stay."""
    return [outbox.c.status == MessageStatus.DELIVERED.value, outbox.c.created_at < cutoff]


@dataclass(frozen=True, slots=True)
class Cutoffs:
    """Which events a prune deletes: done events received before their source's cutoff,
    `default` for every source that `by_source` does not name."""

    default: datetime
    by_source: Mapping[str, datetime] = field(default_factory=dict)

    @classmethod
    def of(cls, cutoff: datetime | Cutoffs) -> Cutoffs:
        return cutoff if isinstance(cutoff, Cutoffs) else cls(cutoff)

    @property
    def earliest(self) -> datetime:
        return min([self.default, *self.by_source.values()])

    @property
    def latest(self) -> datetime:
        return max([self.default, *self.by_source.values()])

    def for_source(self, source: str) -> datetime:
        return self.by_source.get(source, self.default)

    def groups(self) -> list[tuple[datetime, tuple[str, ...], bool]]:
        """(cutoff, sources, whether every source but these) for each cutoff later than the
        earliest: the sources whose events the window may delete, grouped by cutoff."""
        named: dict[datetime, list[str]] = {}
        for source, cutoff in sorted(self.by_source.items()):
            named.setdefault(cutoff, []).append(source)
        earliest = self.earliest
        groups = [(c, tuple(names), False) for c, names in sorted(named.items()) if c > earliest]
        if self.default > earliest:
            groups.append((self.default, tuple(sorted(self.by_source)), True))
        return groups


@dataclass(slots=True)
class Sweep:
    """One prune's progress through the window between the earliest and the latest cutoff:
    the last (received_at, id) each table's batches read there, None before the first."""

    cutoffs: Cutoffs
    events_after: tuple[datetime, int] | None = None
    events_done: bool = False
    log_after: tuple[datetime, int] | None = None
    log_done: bool = False
    read: int = 0
    """Rows the last window batch read (kept ones too): what the pacer times."""

    def __post_init__(self) -> None:
        if self.cutoffs.earliest == self.cutoffs.latest:  # one cutoff: no window
            self.events_done = self.log_done = True

    @property
    def finished(self) -> bool:
        return self.events_done and self.log_done

    @classmethod
    def of(cls, cutoff: datetime | Cutoffs | Sweep) -> Sweep:
        return cutoff if isinstance(cutoff, Sweep) else cls(Cutoffs.of(cutoff))


def _after(table: sa.Table, cursor: tuple[datetime, int] | None) -> list[sa.ColumnElement[bool]]:
    if cursor is None:
        return []
    at, row_id = cursor
    received = table.c.received_at
    return [received >= at, sa.or_(received > at, table.c.id > row_id)]


def _window(table: sa.Table, earliest: datetime, cutoff: datetime) -> list[sa.ColumnElement[bool]]:
    return [table.c.received_at >= earliest, table.c.received_at < cutoff]


def _named(table: sa.Table, sources: tuple[str, ...], others: bool) -> sa.ColumnElement[bool]:
    """`table`'s rows of `sources` (of every other source, with `others`)."""
    if others:
        return table.c.source.not_in(sources) if sources else sa.true()
    return table.c.source.in_(sources)


def _delete_orphan_payloads(connection: Connection, batch_size: int) -> None:
    """Payload rows below the oldest event's id, up to `batch_size`: their events are gone.
    Only the upgrade to schema 14 leaves such rows (its copy runs while older processes go on
    pruning events without knowing of payloads: docs/storage.md, "Upgrading to schema 14");
    otherwise this is one index probe each way, finding nothing."""
    oldest = sa.select(sa.func.min(events.c.id)).scalar_subquery()
    orphans = list(
        connection.execute(
            sa.select(payloads.c.id).where(payloads.c.id < oldest).limit(batch_size)
        ).scalars()
    )
    if orphans:
        connection.execute(payloads.delete().where(payloads.c.id.in_(orphans)))


class Housekeeping:
    def __init__(self, store: StoreSeam) -> None:
        self.store = store

    # -- retention ----------------------------------------------------------------------------

    def count_prunable(self, cutoff: datetime | Cutoffs) -> tuple[int, int, int]:
        """(events, delivery log rows, outbox messages) a prune with these cutoffs would
        delete (delivered messages by the inbox's own retention: they are no source's)."""
        cutoffs = Cutoffs.of(cutoff)
        earliest = cutoffs.earliest
        with self.store.reading() as connection:

            def count(table: sa.Table, *where: sa.ColumnElement[bool]) -> int:
                query = sa.select(sa.func.count()).select_from(table).where(*where)
                return int(connection.execute(query).scalar_one())

            event_count = count(events, *prunable(earliest))
            delivery_count = count(deliveries, *prunable_log(earliest))
            for group_cutoff, sources, others in cutoffs.groups():
                event_count += count(
                    events,
                    *prunable(group_cutoff),
                    events.c.received_at >= earliest,
                    _named(events, sources, others),
                )
                delivery_count += count(
                    deliveries,
                    *_window(deliveries, earliest, group_cutoff),
                    _named(deliveries, sources, others),
                )
            message_count = count(outbox, *prunable_messages(cutoffs.default))
        return event_count, delivery_count, message_count

    def prune_batch(
        self, cutoff: datetime | Cutoffs | Sweep, batch_size: int
    ) -> tuple[int, int, int]:
        """Delete up to `batch_size` prunable events, log rows and delivered messages each, in
        one short transaction whose commit need not be durable on its own (lost to a power
        cut, the next prune makes it again); returns how many of each. Call until all three
        are zero. A batch chosen as a deadlock's victim (its deletes met a delivery's or a
        worker's locks in the other order) is run again before the prune gives up."""
        sweep = Sweep.of(cutoff)
        return self.store.retry_deadlocks(lambda: self._prune_batch(sweep, batch_size), "prune")

    def _prune_batch(self, sweep: Sweep, batch_size: int) -> tuple[int, int, int]:
        cutoffs = sweep.cutoffs
        earliest = cutoffs.earliest
        sweep.read = 0
        with self.store.housekeeping_transaction() as connection:
            event_ids = list(
                connection.execute(
                    sa.select(events.c.id)
                    .where(*prunable(earliest))
                    .order_by(events.c.received_at)
                    .limit(batch_size)
                    .with_for_update(skip_locked=True)
                ).scalars()
            )
            if not event_ids and not sweep.events_done:
                event_ids = self._window_batch(connection, sweep, events, batch_size)
            if event_ids:
                connection.execute(events.delete().where(events.c.id.in_(event_ids)))
                # No foreign key cascades it (`_schema.payloads`): deleted in the same batch.
                connection.execute(payloads.delete().where(payloads.c.id.in_(event_ids)))
            _delete_orphan_payloads(connection, batch_size)
            delivery_ids = list(
                connection.execute(
                    sa.select(deliveries.c.id)
                    .where(*prunable_log(earliest))
                    .order_by(deliveries.c.received_at)
                    .limit(batch_size)
                ).scalars()
            )
            if not delivery_ids and not sweep.log_done:
                delivery_ids = self._window_batch(connection, sweep, deliveries, batch_size)
            if delivery_ids:
                connection.execute(deliveries.delete().where(deliveries.c.id.in_(delivery_ids)))
            message_ids = list(
                connection.execute(
                    sa.select(outbox.c.id)
                    .where(*prunable_messages(cutoffs.default))
                    .order_by(outbox.c.created_at)
                    .limit(batch_size)
                    .with_for_update(skip_locked=True)
                ).scalars()
            )
            if message_ids:
                connection.execute(outbox.delete().where(outbox.c.id.in_(message_ids)))
        return len(event_ids), len(delivery_ids), len(message_ids)

    def _window_batch(
        self, connection: sa.Connection, sweep: Sweep, table: sa.Table, batch_size: int
    ) -> list[int]:
        """The ids of `table` to delete among the next `batch_size` rows of the window (done
        events only): at most a batch read, whatever share of it is kept; the sweep moves past
        them. Nothing (and the table's sweep done) once the window is read to its end.

        The rows are read without a lock: locking a kept row is a write on PostgreSQL (its
        `xmax`, the page dirtied), and a prune would rewrite every kept page of the window
        each day. Only the events to delete are then locked, `SKIP LOCKED` and still done, as
        below the earliest cutoff."""
        cutoffs = sweep.cutoffs
        is_events = table is events
        after = sweep.events_after if is_events else sweep.log_after
        query = (
            sa.select(table.c.id, table.c.source, table.c.received_at)
            .where(*_window(table, cutoffs.earliest, cutoffs.latest), *_after(table, after))
            .order_by(table.c.received_at, table.c.id)
            .limit(batch_size)
        )
        if is_events:
            query = query.where(*prunable(cutoffs.latest)[:1])
        rows = connection.execute(query).all()
        sweep.read = max(sweep.read, len(rows))
        cursor = (rows[-1].received_at, rows[-1].id) if rows else after
        finished = len(rows) < batch_size
        if is_events:
            sweep.events_after, sweep.events_done = cursor, finished
        else:
            sweep.log_after, sweep.log_done = cursor, finished
        chosen = [row.id for row in rows if row.received_at < cutoffs.for_source(row.source)]
        if not is_events or not chosen:
            return chosen
        locked = (
            sa.select(events.c.id)
            .where(events.c.id.in_(chosen), *prunable(cutoffs.latest)[:1])
            .with_for_update(skip_locked=True)
        )
        return list(connection.execute(locked).scalars())

    @property
    def busy_batch_seconds(self) -> float:
        """What a prune batch should take while others use the database (the dialect's
        `prune_busy_batch_seconds`: the pruner's pacing)."""
        return self.store.dialect.prune_busy_batch_seconds

    def pressure_gauge(self) -> PressureGauge:
        """How busy the database is with other work (the pruner's pacing); `close()` it."""
        return PressureGauge(self.store)

    # -- space after a prune ------------------------------------------------------------------

    def checkpoint_passive(self) -> None:
        """Fold what the write-ahead log holds back without waiting for anyone (SQLite)."""
        self.store.dialect.checkpoint_passive(self.store)

    def free_pages(self) -> int:
        """Pages the file holds but no table uses (SQLite), 0 elsewhere."""
        return self.store.dialect.free_pages(self.store)

    def give_back_pages(self, pages: int) -> int:
        """Return up to `pages` free pages to the file system in one short write (SQLite
        files created with incremental auto-vacuum); how many were returned."""
        return self.store.dialect.give_back_pages(self.store, pages)

    def empty(self) -> None:
        """Delete every row of hookinbox's tables but the schema's version (a test's fresh
        start, where the tables cannot be dropped: a Django TransactionTestCase's)."""
        with self.store.transaction() as connection:
            for table in reversed(metadata.sorted_tables):
                if table is not schema_versions:
                    connection.execute(table.delete())

    # -- scheduled jobs -----------------------------------------------------------------------

    def claim_job(self, name: str, slot: datetime, now: datetime) -> bool:
        """Claim the run of job `name` for the schedule slot starting at `slot`.

        A compare-and-set on the job's row: of all processes asking for the same slot,
        exactly one sees its update succeed. Works the same on every database. On MariaDB,
        processes that race to create the row can deadlock (each failed insert holds a shared
        lock on the key that the others' update waits for): the victim, rolled back whole, runs
        again and then sees the winner's row.
        """
        return self.store.retry_deadlocks(lambda: self._claim_job(name, slot, now), "claim_job")

    def _claim_job(self, name: str, slot: datetime, now: datetime) -> bool:
        claimed_at = max(now, slot)  # at or past the slot, so the slot reads as taken
        with self.store.transaction() as connection:
            exists = connection.execute(sa.select(jobs.c.name).where(jobs.c.name == name)).first()
            if exists is None:
                insert = sa.insert(jobs).values(name=name, last_run_at=claimed_at)
                try:
                    with connection.begin_nested():
                        connection.execute(insert)
                    return True
                except sa.exc.IntegrityError:
                    pass  # another process created it first: the compare-and-set decides
            claimed = connection.execute(
                jobs.update()
                .where(jobs.c.name == name, jobs.c.last_run_at < slot)
                .values(last_run_at=claimed_at)
            )
            return claimed.rowcount == 1

    def record_job_result(self, name: str, result: str) -> None:
        with self.store.transaction() as connection:
            connection.execute(jobs.update().where(jobs.c.name == name).values(last_result=result))

    def last_job_run(self, name: str) -> tuple[datetime, str | None] | None:
        with self.store.reading() as connection:
            row = connection.execute(
                sa.select(jobs.c.last_run_at, jobs.c.last_result).where(jobs.c.name == name)
            ).first()
        return (row.last_run_at, row.last_result) if row else None
