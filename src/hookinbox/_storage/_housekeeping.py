"""The housekeeping gateway (`Store.housekeeping`): retention (what a prune would delete, and
deleting it in short batches), the daily jobs' claims, and the space a prune frees.

Done events (processed, unhandled) older than the retention are pruned with their payloads
and delivered outbox messages; the delivery log by its own time. Pending, deferred,
processing, failed and stale events are never pruned, however old: they have queue rows, and
operators act on them.
"""

from __future__ import annotations

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

    def count_prunable(self, cutoff: datetime) -> tuple[int, int, int]:
        """(events, delivery log rows, outbox messages) a prune with this cutoff would delete."""
        with self.store.reading() as connection:
            event_count = connection.execute(
                sa.select(sa.func.count()).select_from(events).where(*prunable(cutoff))
            ).scalar_one()
            delivery_count = connection.execute(
                sa.select(sa.func.count()).select_from(deliveries).where(*prunable_log(cutoff))
            ).scalar_one()
            message_count = connection.execute(
                sa.select(sa.func.count()).select_from(outbox).where(*prunable_messages(cutoff))
            ).scalar_one()
        return int(event_count), int(delivery_count), int(message_count)

    def prune_batch(self, cutoff: datetime, batch_size: int) -> tuple[int, int, int]:
        """Delete up to `batch_size` prunable events, log rows and delivered messages each, in
        one short transaction whose commit need not be durable on its own (lost to a power
        cut, the next prune makes it again); returns how many of each. Call until all three
        are zero. A batch chosen as a deadlock's victim (its deletes met a delivery's or a
        worker's locks in the other order) is run again before the prune gives up."""
        return self.store.retry_deadlocks(lambda: self._prune_batch(cutoff, batch_size), "prune")

    def _prune_batch(self, cutoff: datetime, batch_size: int) -> tuple[int, int, int]:
        with self.store.housekeeping_transaction() as connection:
            event_ids = list(
                connection.execute(
                    sa.select(events.c.id)
                    .where(*prunable(cutoff))
                    .order_by(events.c.received_at)
                    .limit(batch_size)
                    .with_for_update(skip_locked=True)
                ).scalars()
            )
            if event_ids:
                connection.execute(events.delete().where(events.c.id.in_(event_ids)))
                # No foreign key cascades it (`_schema.payloads`): deleted in the same batch.
                connection.execute(payloads.delete().where(payloads.c.id.in_(event_ids)))
            _delete_orphan_payloads(connection, batch_size)
            delivery_ids = list(
                connection.execute(
                    sa.select(deliveries.c.id)
                    .where(*prunable_log(cutoff))
                    .order_by(deliveries.c.received_at)
                    .limit(batch_size)
                ).scalars()
            )
            if delivery_ids:
                connection.execute(deliveries.delete().where(deliveries.c.id.in_(delivery_ids)))
            message_ids = list(
                connection.execute(
                    sa.select(outbox.c.id)
                    .where(*prunable_messages(cutoff))
                    .order_by(outbox.c.created_at)
                    .limit(batch_size)
                    .with_for_update(skip_locked=True)
                ).scalars()
            )
            if message_ids:
                connection.execute(outbox.delete().where(outbox.c.id.in_(message_ids)))
        return len(event_ids), len(delivery_ids), len(message_ids)

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
        exactly one sees its update succeed. Works the same on every database.
        """
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
