"""Schema 9's copy of the open events into `hookinbox_event_queue`: made in short transactions
before the step, while the processes of the older version go on storing and processing.

Schema 9 keeps unfinished work in a narrow table beside the events (`_migrations.py`). Made
inside the step, under the lock that holds every delivery, the copy of an inbox's open events
held them for as long as it took: 2.4 s for 500,000 open events on PostgreSQL (issue 45),
against a provider's ack deadline of 3 s. So `copy_open_events` makes it beforehand:

1. `prepare`, one short transaction under the migration lock: the queue table and its indexes,
   schema 9's trigger that queues every event inserted, and the dialect's triggers that carry
   every later change of an event (its status, schedule, attempts; its deletion) into its
   queue row (`Dialect.mirror_queue_changes`). From its commit on, whoever writes an event
   keeps its queue row right.
2. `copy_batch`, again and again: the open events among the next ids, copied where they have
   no queue row yet (`INSERT ... SELECT ... ON CONFLICT DO NOTHING`), in transactions sized to
   take about `TARGET_SECONDS`. The last id copied is kept in `hookinbox_jobs` in the same
   transaction, so a migration killed midway resumes there; the batches chase the newest id
   until one reaches it.
3. `sweep_batch`: the tombstones. An event closed or deleted while the copy runs leaves its
   queue row marked `done` rather than no row: a batch that read the event before that change
   (its statement began earlier) then finds the row and inserts nothing, where a deleted row
   would let it bring the event back. So no batch takes a lock on an event: none waits for a
   delivery or a handler, and none makes them wait.

The step then (`finish_copy`, under its lock) copies the events stored since the last batch (the
ids above the position), deletes the tombstones left since the last sweep and drops the
mirroring triggers: what it reads grows with what arrived during the last batch, not with the
open events. Without step 1 (a new inbox, Django's migrations, which run in Django's one
transaction) `finish_copy` copies every open event, as the step always did.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, TypeVar

import sqlalchemy as sa
from sqlalchemy import Connection, Engine
from sqlalchemy.sql.expression import Executable

from hookinbox._logging import logger
from hookinbox._storage._dialects import Dialect, dialect_of
from hookinbox._storage._dialects._borrowed import OwnsNoTransactions
from hookinbox._storage._dialects._partial import partial
from hookinbox._storage._dialects._table_options import row_id_type
from hookinbox._storage._errors import is_deadlock
from hookinbox._storage._lock_waits import patiently
from hookinbox._storage._types import UTCDateTime

if TYPE_CHECKING:
    from alembic.operations import Operations

log = logger("hookinbox._storage")
T = TypeVar("T")

SCHEMA = 9
"""The version whose step this copy prepares."""
POSITION_JOB = "schema 9: queue copied up to id"
"""The `hookinbox_jobs` row keeping the copy's position (its `last_result`: an id)."""
TOMBSTONE = "done"
"""The state of a queue row whose event was closed or deleted while the copy ran (written by
the dialects' mirroring triggers)."""
TARGET_SECONDS = 0.1
"""How long a batch should take: on SQLite it holds the one write lock, so a delivery waits
for it; on PostgreSQL and MariaDB it blocks nothing, and stays short so that a killed copy
loses little and a step waits for one batch at most."""
FIRST_ROWS = 1_000
MIN_ROWS = 100
MAX_ROWS = 100_000
SWEEP_ROWS = 1_000
PAUSE = 0.01
"""Seconds between batches at the least (a batch is followed by a pause as long as it took):
SQLite's waiting writers take the lock in the gap."""
TRIES = 5
"""Runs of a batch that the database chose as a deadlock's victim, before the error goes up."""
PROGRESS_EVERY = 5.0
"""Seconds between the log lines of a long copy."""

_CLOSED = ("processed", "unhandled")
_events = sa.table(
    "hookinbox_events",
    sa.column("id", sa.BigInteger),
    sa.column("status", sa.String),
    sa.column("next_attempt_at", UTCDateTime),
    sa.column("received_at", UTCDateTime),
    sa.column("attempts", sa.Integer),
)
_queue = sa.table(
    "hookinbox_event_queue",
    sa.column("id", sa.BigInteger),
    sa.column("state", sa.String),
    sa.column("next_attempt_at", UTCDateTime),
    sa.column("received_at", UTCDateTime),
    sa.column("attempts", sa.Integer),
)
_jobs = sa.table(
    "hookinbox_jobs",
    sa.column("name", sa.String),
    sa.column("last_run_at", UTCDateTime),
    sa.column("last_result", sa.Text),
)
_versions = sa.table("hookinbox_schema_versions", sa.column("version", sa.Integer))


def copy_open_events(engine: Engine, target: int) -> None:
    """Steps 1 to 3, when this migration brings an inbox that has events to schema 9 or
    later; nothing otherwise, nor on a framework's connection (Django's transaction)."""
    if target < SCHEMA or isinstance(engine.dialect, OwnsNoTransactions):
        return
    with engine.connect() as connection:
        if not prepare(connection):
            return
        in_batches(connection, copy_batch, "schema 9: open events copied to the queue")
        while _retrying(sweep_batch, connection, SWEEP_ROWS) == SWEEP_ROWS:
            time.sleep(PAUSE)


Batch = Callable[[Connection, int], "tuple[int, int] | None"]
"""A copy's batch of up to N ids in a transaction of its own: (the last id copied, the newest
id), None once there is nothing left to copy."""


def in_batches(connection: Connection, batch: Batch, progress: str) -> None:
    """`batch` run until it has copied up to the newest id, each sized to take about
    `TARGET_SECONDS` and followed by a pause as long; a log line (`progress` up to id N of M)
    every `PROGRESS_EVERY` seconds."""
    rows, started, last_log = FIRST_ROWS, time.monotonic(), time.monotonic()
    while (span := _retrying(batch, connection, rows)) is not None:
        now = time.monotonic()
        rows = _next_size(rows, took=now - started)
        if now - last_log >= PROGRESS_EVERY:
            log.info("%s up to id %d of %d", progress, *span)
            last_log = now
        # As long as the batch took: the copy has half of the database's time at most, the
        # deliveries (and on SQLite, the write lock) the rest.
        time.sleep(max(PAUSE, now - started))
        started = time.monotonic()


def _next_size(rows: int, took: float) -> int:
    """The next batch's ids, so that it takes about `TARGET_SECONDS`: at most twice as many
    as the last, never fewer than `MIN_ROWS` nor more than `MAX_ROWS`."""
    fitting = int(rows * TARGET_SECONDS / max(took, 1e-3))
    return max(MIN_ROWS, min(MAX_ROWS, 2 * rows, fitting))


def prepare(connection: Connection) -> bool:
    """Step 1 in a transaction of its own (its trigger DDL waiting for the events table a
    little at a time: `_lock_waits.py`); False (nothing done) unless the inbox is between
    schema 1 and 8."""
    return patiently(connection.engine, lambda wait: _prepare(connection, wait))


def _prepare(connection: Connection, wait: float | None) -> bool:
    from alembic.operations import Operations
    from alembic.runtime.migration import MigrationContext

    dialect = _dialect(connection)
    with connection.begin():
        dialect.lock_for_migration(connection)
        if wait is not None:
            dialect.limit_lock_waits(connection, wait)
        if not _before_schema_9(connection):
            return False
        op = Operations(MigrationContext.configure(connection))
        if not sa.inspect(connection).has_table("hookinbox_event_queue"):
            # A position is only good for the table it was copied into (and its triggers).
            forget_position(connection)
        create_queue_table(op)
        dialect.queue_new_events(op)
        dialect.mirror_queue_changes(op)
    return True


def copy_batch(connection: Connection, rows: int) -> tuple[int, int] | None:
    """Step 2 for the next `rows` ids, in a transaction of its own: (the last id copied, the
    newest id); None once the copy has reached the newest id (or schema 9 is applied)."""
    with connection.begin():
        _dialect(connection).lock_for_copy(connection)
        if not _before_schema_9(connection):
            return None
        low = position(connection)
        newest = connection.execute(sa.select(sa.func.max(_events.c.id))).scalar() or 0
        if low >= newest:
            return None
        high = min(low + rows, newest)
        connection.execute(_copy(_dialect(connection), low, high))
        save_position(connection, POSITION_JOB, high)
    return high, newest


def sweep_batch(connection: Connection, rows: int) -> int | None:
    """Step 3 for up to `rows` tombstones, in a transaction of its own: how many it deleted
    (None once schema 9 is applied)."""
    with connection.begin():
        _dialect(connection).lock_for_copy(connection)
        if not _before_schema_9(connection):
            return None
        ids = (
            connection.execute(
                sa.select(_queue.c.id).where(_queue.c.state == TOMBSTONE).limit(rows)
            )
            .scalars()
            .all()
        )
        if ids:
            connection.execute(
                _queue.delete().where(_queue.c.id.in_(ids), _queue.c.state == TOMBSTONE)
            )
    return len(ids)


def create_queue_table(op: Operations) -> None:
    """Schema 9's queue table and its indexes, as released, each unless it exists."""
    dialect = dialect_of(op.get_context().dialect)
    row_id = row_id_type()
    op.create_table(
        "hookinbox_event_queue",
        sa.Column("id", row_id, primary_key=True, autoincrement=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("next_attempt_at", UTCDateTime, nullable=False),
        sa.Column("received_at", UTCDateTime, nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("lease_token", sa.String(32)),
        sa.Column("lease_expires_at", UTCDateTime),
        if_not_exists=True,
    )
    dialect.set_fill_factor(op, "hookinbox_event_queue", 70)
    waiting = sa.text("state IN ('pending', 'deferred')")
    op.create_index(
        "ix_hookinbox_event_queue_due",
        "hookinbox_event_queue",
        ["next_attempt_at", "id"],
        **partial(waiting),
        if_not_exists=True,
    )
    op.create_index(
        "ix_hookinbox_event_queue_open",
        "hookinbox_event_queue",
        ["state", "received_at"],
        if_not_exists=True,
    )


def finish_copy(op: Operations) -> None:
    """The copy's end, inside the step (under its lock): the open events above the position
    (all of them when no copy ran before), then no tombstone and no mirroring trigger."""
    connection = op.get_bind()
    dialect = dialect_of(connection)
    low = position(connection)
    # First: were the step cut short where each statement commits (MariaDB), the next run
    # copies everything again rather than trust a position without its triggers.
    forget_position(connection)
    connection.execute(_copy(dialect, low, None))
    dialect.stop_mirroring_queue(op)
    connection.execute(_queue.delete().where(_queue.c.state == TOMBSTONE))


def _copy(dialect: Dialect, low: int, high: int | None) -> Executable:
    """The open events with ids in (low, high] into the queue, each unless it has a row: one
    the mirroring triggers wrote is newer than what this statement may have read. A held
    event (`processing`) is due again at once: its worker's claim cannot succeed any more."""
    in_range = _events.c.id > low if high is None else _events.c.id.between(low + 1, high)
    select = sa.select(
        _events.c.id,
        sa.case((_events.c.status == "processing", "pending"), else_=_events.c.status),
        _events.c.next_attempt_at,
        _events.c.received_at,
        _events.c.attempts,
    ).where(in_range, _events.c.status.not_in(_CLOSED))
    columns = ["id", "state", "next_attempt_at", "received_at", "attempts"]
    statement = dialect.insert(_queue).from_select(columns, select)
    return statement.on_conflict_do_nothing(index_elements=["id"])


def _before_schema_9(connection: Connection) -> bool:
    return 1 <= schema_version(connection) < SCHEMA


def schema_version(connection: Connection) -> int:
    """The database's schema version, 0 without hookinbox's tables."""
    if not sa.inspect(connection).has_table("hookinbox_schema_versions"):
        return 0
    return connection.execute(sa.select(sa.func.max(_versions.c.version))).scalar() or 0


def position(connection: Connection, job: str = POSITION_JOB) -> int:
    """The last id a copy kept in `hookinbox_jobs` under `job`, 0 without one."""
    value = connection.execute(sa.select(_jobs.c.last_result).where(_jobs.c.name == job)).scalar()
    return int(value) if value else 0


def save_position(connection: Connection, job: str, high: int) -> None:
    """Copies may run beside each other (PostgreSQL): each saves the end of its own batch,
    below which every id is copied, whichever saves last."""
    values = {"last_run_at": datetime.now(UTC), "last_result": str(high)}
    statement = _dialect(connection).insert(_jobs).values(name=job, **values)
    connection.execute(statement.on_conflict_do_update(index_elements=["name"], set_=values))


def forget_position(connection: Connection, job: str = POSITION_JOB) -> None:
    connection.execute(_jobs.delete().where(_jobs.c.name == job))


def _dialect(connection: Connection) -> Dialect:
    return dialect_of(connection)


def _retrying(batch: Callable[[Connection, int], T], connection: Connection, rows: int) -> T:
    """`batch` run again when the database chose its transaction as a deadlock's victim (an
    older worker's lease may write the same queue rows through the mirroring triggers)."""
    for run in range(1, TRIES + 1):
        try:
            return batch(connection, rows)
        except sa.exc.DBAPIError as error:
            if not is_deadlock(error) or run == TRIES:
                raise
            time.sleep(0.05 * run)
    raise AssertionError("unreachable")
