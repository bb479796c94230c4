"""Schema 14's copy of every event's body and headers into `hookinbox_payloads`: made in short
transactions before the step, while the processes of the older version go on storing and
processing events (expand, then contract: docs/storage.md, "Upgrading to schema 14").

A 10M-event inbox holds about 10M bodies: copied under the step's lock, which holds every
delivery, they would hold them for minutes. So `copy_payloads` copies them beforehand, as
schema 9's copy of the open events is made (`_queue_copy.py`, whose batch sizing and pacing
this copy shares):

1. `prepare`, one short transaction under the migration lock: the payloads table, and the
   dialect's trigger that copies the payload of every event inserted from then on
   (`Dialect.copy_new_payloads`). What older processes store meanwhile needs no copying.
2. `copy_batch`, again and again: the payloads of the next ids (`INSERT ... SELECT ... ON
   CONFLICT DO NOTHING`: a payload is written once and never changes, so a copy is right
   whenever it is made), in transactions sized to take about `TARGET_SECONDS`; the last id
   copied is kept in `hookinbox_jobs` in the same transaction, so a migration killed midway
   resumes there. The batches chase the newest id until one reaches it.

The step (`finish_copy`, under its lock) then copies what is above the position (nothing
after a full copy, since the trigger copied every later insert; every event where no copy ran:
a new inbox, Django's migrations, which run in Django's one transaction) and drops the
trigger and the events' `body` and `headers` (`Dialect.drop_payload_columns`).

An event that an older process prunes after its payload was copied leaves the payload row
behind: the prune of schema 14 deletes such rows (`_housekeeping._delete_orphan_payloads`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy import Connection, Engine

from hookinbox._storage._dialects import Dialect, dialect_of
from hookinbox._storage._dialects._borrowed import OwnsNoTransactions
from hookinbox._storage._dialects._table_options import row_id_type
from hookinbox._storage._lock_waits import patiently
from hookinbox._storage._queue_copy import (
    forget_position,
    in_batches,
    position,
    save_position,
    schema_version,
)
from hookinbox._storage._types import LongBinary, LongText

if TYPE_CHECKING:
    from alembic.operations import Operations

SCHEMA = 14
"""The version whose step this copy prepares."""
POSITION_JOB = "schema 14: payloads copied up to id"
"""The `hookinbox_jobs` row keeping the copy's position (its `last_result`: an id)."""

_events = sa.table(
    "hookinbox_events",
    sa.column("id", sa.BigInteger),
    sa.column("body", LongBinary),
    sa.column("headers", LongText),
)
_versions = sa.table("hookinbox_schema_versions", sa.column("version", sa.Integer))
_payloads = sa.table(
    "hookinbox_payloads",
    sa.column("id", sa.BigInteger),
    sa.column("body", LongBinary),
    sa.column("headers", LongText),
)


def copy_payloads(engine: Engine, target: int) -> None:
    """Steps 1 and 2, when this migration brings an inbox to schema 14 or later; nothing
    otherwise, nor on a framework's connection (Django's transaction)."""
    if target < SCHEMA or isinstance(engine.dialect, OwnsNoTransactions):
        return
    with engine.connect() as connection:
        if not prepare(connection):
            return
        in_batches(connection, copy_batch, "schema 14: payloads copied")


def prepare(connection: Connection) -> bool:
    """Step 1 in a transaction of its own; False (nothing done) unless the inbox is between
    schema 1 and 13."""
    return patiently(connection.engine, lambda wait: _prepare(connection, wait))


def _prepare(connection: Connection, wait: float | None) -> bool:
    from alembic.operations import Operations
    from alembic.runtime.migration import MigrationContext

    dialect = dialect_of(connection)
    with connection.begin():
        dialect.lock_for_migration(connection)
        if wait is not None:
            dialect.limit_lock_waits(connection, wait)
        if not 1 <= schema_version(connection) < SCHEMA or not has_payload_columns(connection):
            # No column to copy from: a rollback that deleted this version's row (the step
            # runs again, and finds its work done).
            return False
        op = Operations(MigrationContext.configure(connection))
        if not sa.inspect(connection).has_table("hookinbox_payloads"):
            # A position is only good for the table it was copied into.
            forget_position(connection, POSITION_JOB)
        create_payloads_table(op)
        dialect.copy_new_payloads(op)
    return True


def copy_batch(connection: Connection, rows: int) -> tuple[int, int] | None:
    """Step 2 for the next `rows` ids, in a transaction of its own: (the last id copied, the
    newest id); None once the copy has reached the newest id (or schema 14 is applied)."""
    with connection.begin():
        dialect = dialect_of(connection)
        dialect.lock_for_copy(connection)
        # The versions' table exists (`prepare` found it): no catalog read, which cost more
        # than a batch's rows on a busy server, and the batches shrank to fit it.
        version = connection.execute(sa.select(sa.func.max(_versions.c.version))).scalar()
        if not 1 <= (version or 0) < SCHEMA:
            return None
        low = position(connection, POSITION_JOB)
        newest = connection.execute(sa.select(sa.func.max(_events.c.id))).scalar() or 0
        if low >= newest:
            return None
        high = min(low + rows, newest)
        connection.execute(_copy(dialect, low, high))
        save_position(connection, POSITION_JOB, high)
    return high, newest


def create_payloads_table(op: Operations) -> None:
    """Schema 14's payloads table, as released, unless it exists."""
    op.create_table(
        "hookinbox_payloads",
        sa.Column("id", row_id_type(), primary_key=True, autoincrement=False),
        sa.Column("body", LongBinary, nullable=False),
        sa.Column("headers", LongText, nullable=False),
        if_not_exists=True,
    )


def finish_copy(op: Operations) -> None:
    """The copy's end, inside the step (under its lock): the payloads above the position (all
    of them when no copy ran before), then no trigger and no payload columns in the events."""
    connection = op.get_bind()
    dialect = dialect_of(connection)
    low = position(connection, POSITION_JOB)
    # First: were the step cut short where each statement commits (MariaDB), the next run
    # copies everything again rather than trust a position.
    forget_position(connection, POSITION_JOB)
    if has_payload_columns(connection):
        connection.execute(_copy(dialect, low, None))
    dialect.drop_payload_columns(op)


def has_payload_columns(connection: Connection) -> bool:
    """False once schema 14 dropped them (a step run again after a rollback of its row, or
    cut short on MariaDB after its DDL committed)."""
    columns = sa.inspect(connection).get_columns("hookinbox_events")
    return any(column["name"] == "body" for column in columns)


def _copy(dialect: Dialect, low: int, high: int | None) -> sa.Executable:
    """The payloads of the events with ids in (low, high] (above `low` when `high` is None),
    each unless it has a row: the trigger wrote it, or a batch cut short."""
    in_range = _events.c.id > low if high is None else _events.c.id.between(low + 1, high)
    select = sa.select(_events.c.id, _events.c.body, _events.c.headers).where(in_range)
    statement = dialect.insert(_payloads).from_select(["id", "body", "headers"], select)
    return statement.on_conflict_do_nothing(index_elements=["id"])
