"""Versioned, in-place schema upgrades, safe when several processes start at once.

Each step is frozen once released: it states the DDL of its own version (never the live
tables of `_schema.py`, which move on), through Alembic's operations so that SQLite's
limited ALTER TABLE is handled for us. We keep our own small runner instead of an Alembic
environment because hookinbox migrates itself from `serve` and from library calls, with no
configuration files in the user's project, and must serialise concurrent starts: PostgreSQL
takes an advisory lock, SQLite's BEGIN IMMEDIATE already admits one writer, MariaDB a named
lock. Schema 9's copy of the open events is made before the steps' transaction, in short ones
of its own (`_queue_copy.py`), so that the step's lock never covers it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy import Connection, Engine

from hookinbox._errors import ConfigurationError
from hookinbox._storage._dialects import Dialect, dialect_named
from hookinbox._storage._errors import translate_errors
from hookinbox._storage._lock_waits import patiently
from hookinbox._storage._options import READ_ONLY
from hookinbox._storage._queue_copy import copy_open_events, create_queue_table, finish_copy
from hookinbox._storage._schema import schema_versions
from hookinbox._storage._types import LongBinary, LongText, UTCDateTime

if TYPE_CHECKING:  # alembic costs 0.1 s to import: only a migration pays it
    from alembic.operations import Operations

Step = Callable[["Operations"], None]
AfterMigrate = Callable[[Connection], None]


def _v1_events(op: Operations) -> None:
    row_id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
    op.create_table(
        "hookinbox_events",
        sa.Column("id", row_id, primary_key=True, autoincrement=True),
        sa.Column("source", sa.String(64), nullable=False),
        sa.Column("event_id", sa.String(255), nullable=False),
        sa.Column("event_type", sa.String(255)),
        sa.Column("occurred_at", UTCDateTime),
        sa.Column("received_at", UTCDateTime, nullable=False),
        sa.Column("body", LongBinary, nullable=False),
        sa.Column("headers", LongText, nullable=False),
        sa.Column("body_sha256", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("outcome", sa.String(32)),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("next_attempt_at", UTCDateTime, nullable=False),
        sa.Column("lease_token", sa.String(32)),
        sa.Column("lease_expires_at", UTCDateTime),
        sa.Column("deferred_since", UTCDateTime),
        sa.Column("deferrals", sa.Integer, nullable=False),
        sa.Column("last_error", LongText),
        sa.Column("delivery_count", sa.Integer, nullable=False),
        sa.Column("key_conflicts", sa.Integer, nullable=False),
        sa.Column("last_delivery_at", UTCDateTime, nullable=False),
        sa.Column("processed_at", UTCDateTime),
        sa.UniqueConstraint("source", "event_id", name="uq_hookinbox_events_source_event_id"),
    )
    waiting = sa.text("status IN ('pending', 'deferred')")
    leased = sa.text("status = 'processing'")
    op.create_index(
        "ix_hookinbox_events_due",
        "hookinbox_events",
        ["next_attempt_at"],
        postgresql_where=waiting,
        sqlite_where=waiting,
    )
    op.create_index(
        "ix_hookinbox_events_leased",
        "hookinbox_events",
        ["lease_expires_at"],
        postgresql_where=leased,
        sqlite_where=leased,
    )
    op.create_index("ix_hookinbox_events_received_at", "hookinbox_events", ["received_at"])
    open_events = sa.text("status NOT IN ('processed', 'unhandled')")
    op.create_index(
        "ix_hookinbox_events_open",
        "hookinbox_events",
        ["status", "received_at"],
        postgresql_where=open_events,
        sqlite_where=open_events,
    )
    op.create_table(
        "hookinbox_deliveries",
        sa.Column("id", row_id, primary_key=True, autoincrement=True),
        sa.Column("source", sa.String(64), nullable=False),
        sa.Column("event_id", sa.String(255), nullable=False),
        sa.Column("received_at", UTCDateTime, nullable=False),
        sa.Column("duplicate", sa.Boolean, nullable=False),
        sa.Column("key_conflict", sa.Boolean, nullable=False),
    )
    op.create_index("ix_hookinbox_deliveries_received_at", "hookinbox_deliveries", ["received_at"])
    op.create_index("ix_hookinbox_deliveries_event", "hookinbox_deliveries", ["source", "event_id"])
    op.create_table(
        "hookinbox_jobs",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("last_run_at", UTCDateTime, nullable=False),
        sa.Column("last_result", LongText),
    )
    op.create_table(
        "hookinbox_ordering",
        sa.Column("object_key", sa.String(255), primary_key=True),
        sa.Column("position", sa.BigInteger, nullable=False),
        sa.Column("source", sa.String(64), nullable=False),
        sa.Column("event_id", sa.String(255), nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
    )
    # Wake idle workers (LISTEN hookinbox_events) the moment a new event commits.
    _dialect(op).create_notify_trigger(
        op, "hookinbox_events", "hookinbox_events", "hookinbox_notify_new_event"
    )


def _v2_outbox(op: Operations) -> None:
    row_id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
    op.create_table(
        "hookinbox_outbox",
        sa.Column("id", row_id, primary_key=True, autoincrement=True),
        sa.Column("destination", sa.String(64), nullable=False),
        sa.Column("message_key", sa.String(255), nullable=False),
        sa.Column("ordering_key", sa.String(255)),
        sa.Column("payload", LongText, nullable=False),
        sa.Column("source", sa.String(64)),
        sa.Column("event_id", sa.String(255)),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("next_attempt_at", UTCDateTime, nullable=False),
        sa.Column("lease_token", sa.String(32)),
        sa.Column("lease_expires_at", UTCDateTime),
        sa.Column("last_error", LongText),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("delivered_at", UTCDateTime),
        sa.UniqueConstraint(
            "destination", "message_key", name="uq_hookinbox_outbox_destination_key"
        ),
    )
    due = sa.text("status = 'pending'")
    leased = sa.text("status = 'delivering'")
    unsent = sa.text("status IN ('pending', 'delivering')")
    op.create_index(
        "ix_hookinbox_outbox_due",
        "hookinbox_outbox",
        ["next_attempt_at"],
        postgresql_where=due,
        sqlite_where=due,
    )
    op.create_index(
        "ix_hookinbox_outbox_leased",
        "hookinbox_outbox",
        ["lease_expires_at"],
        postgresql_where=leased,
        sqlite_where=leased,
    )
    op.create_index(
        "ix_hookinbox_outbox_ordering",
        "hookinbox_outbox",
        ["ordering_key", "id"],
        postgresql_where=unsent,
        sqlite_where=unsent,
    )
    op.create_index("ix_hookinbox_outbox_created_at", "hookinbox_outbox", ["created_at"])
    not_delivered = sa.text("status <> 'delivered'")
    op.create_index(
        "ix_hookinbox_outbox_open",
        "hookinbox_outbox",
        ["status"],
        postgresql_where=not_delivered,
        sqlite_where=not_delivered,
    )
    _dialect(op).create_notify_trigger(
        op, "hookinbox_outbox", "hookinbox_outbox", "hookinbox_notify_new_message"
    )


def _v3_sessions_and_forced_replays(op: Operations) -> None:
    op.create_table(
        "hookinbox_revoked_sessions",
        sa.Column("session_id", sa.String(64), primary_key=True),
        sa.Column("expires_at", UTCDateTime, nullable=False),
    )
    op.add_column("hookinbox_events", sa.Column("forced_replay_at", UTCDateTime))


def _v4_audit(op: Operations) -> None:
    row_id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
    op.create_table(
        "hookinbox_audit",
        sa.Column("id", row_id, primary_key=True, autoincrement=True),
        sa.Column("source", sa.String(64), nullable=False),
        sa.Column("event_id", sa.String(255), nullable=False),
        sa.Column("at", UTCDateTime, nullable=False),
        sa.Column("action", sa.String(32), nullable=False),
        sa.Column("actor", sa.String(255), nullable=False),
        sa.Column("reason", LongText),
        sa.Column("previous_status", sa.String(16), nullable=False),
        sa.Column("previous_outcome", sa.String(32)),
        sa.Column("previous_attempts", sa.Integer, nullable=False),
    )
    op.create_index("ix_hookinbox_audit_event", "hookinbox_audit", ["source", "event_id", "id"])


def _v5_attempts_history(op: Operations) -> None:
    op.add_column("hookinbox_events", sa.Column("attempts_before_replay", sa.Integer))


def _v6_workers(op: Operations) -> None:
    op.create_table(
        "hookinbox_workers",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("started_at", UTCDateTime, nullable=False),
        sa.Column("last_beat_at", UTCDateTime, nullable=False),
        sa.Column("expires_at", UTCDateTime, nullable=False),
    )
    op.create_index("ix_hookinbox_workers_expires_at", "hookinbox_workers", ["expires_at"])


def _v7_outbox_trace_context(op: Operations) -> None:
    op.add_column("hookinbox_outbox", sa.Column("trace_context", LongText))


def _v8_due_in_lease_order(op: Operations) -> None:
    """The due indexes of events and outbox messages keyed as the lease reads them,
    `(next_attempt_at, id)`, so that a lease stops after its first rows instead of sorting
    every due row (docs/storage.md, "Upgrading to schema 8").

    `IF NOT EXISTS`: an operator of a large PostgreSQL inbox may build the new indexes
    beforehand with `CREATE INDEX CONCURRENTLY` (the same statements), and this step then
    only drops the old ones, without holding the tables against writes while it reads them.
    """
    for table, name, where in (
        ("hookinbox_events", "ix_hookinbox_events_due", "status IN ('pending', 'deferred')"),
        ("hookinbox_outbox", "ix_hookinbox_outbox_due", "status = 'pending'"),
    ):
        dialect = _dialect(op)
        dialect.create_index_if_missing(op, f"{name}_order", table, "next_attempt_at, id", where)
        dialect.drop_index_if_exists(op, table, name)


def _v9_queue_beside_the_events(op: Operations) -> None:
    """Unfinished work moves to a narrow table of its own, `hookinbox_event_queue`, so that
    processing an event no longer updates any indexed column of `hookinbox_events` (claims
    that stay heap-only on PostgreSQL: docs/storage.md, "Upgrading to schema 9"); an outbox
    message being delivered is `pending` with a lease token, no longer `delivering`.

    The open events are copied before this step, in short transactions that hold no delivery
    (`_queue_copy.py`); the step itself is short whatever the number of open events: the
    tables are locked (PostgreSQL waits for transactions already writing them, then holds new
    ones for the step's milliseconds), the events stored since the copy's last batch are
    copied (every open event where no copy ran: a new inbox, Django's migrations), the
    indexes the queue replaces are dropped, and the fill factors change pages written from
    now on. Processes of an older hookinbox fail closed afterwards: their leases are refused
    by a trigger (nothing is processed twice), and their inserts still queue the event (the
    queue is filled by a trigger on insert). Each statement finds what it makes, if it exists
    already: a copy made it, or (MariaDB, whose DDL commits on its own) a step cut short.
    """
    dialect = _dialect(op)
    dialect.lock_tables(op, "hookinbox_events", "hookinbox_outbox")
    create_queue_table(op)
    dialect.queue_new_events(op)
    finish_copy(op)
    # A held event was copied due again at once: clear its old worker's lease, so that the
    # worker's claim, conditional on the token, cannot succeed any more.
    op.execute(
        "UPDATE hookinbox_events SET status = 'pending', lease_token = NULL,"
        " lease_expires_at = NULL WHERE status = 'processing'"
    )
    for index in (
        "ix_hookinbox_events_due_order",
        "ix_hookinbox_events_leased",
        "ix_hookinbox_events_open",
    ):
        dialect.drop_index_if_exists(op, "hookinbox_events", index)
    dialect.set_fill_factor(op, "hookinbox_events", 85)
    # A message a relay holds keeps its lease (at least once: no second send before it ends).
    op.execute("UPDATE hookinbox_outbox SET status = 'pending' WHERE status = 'delivering'")
    dialect.drop_index_if_exists(op, "hookinbox_outbox", "ix_hookinbox_outbox_leased")
    dialect.refuse_old_leases(op)


def _v10_room_for_processing(op: Operations) -> None:
    """Fill factors that leave every event's page room for the versions its processing writes
    before PostgreSQL can prune the old ones (docs/storage.md, "Claims that stay heap-only").

    Schema 9's 85 % left room for one new version of a small event per page: with two
    workers, whose overlapping transactions keep a page's previous versions visible for a
    while, about half of the events' final updates were not heap-only. At 50 % every event
    on a page can be rewritten once before any pruning. The narrow queue table's rows are few
    (only unfinished work), so it costs nothing to leave it most of each page.

    Catalog changes only (`SHARE UPDATE EXCLUSIVE`: reads and writes go on): they apply to
    the pages written from now on; nothing is rewritten.
    """
    dialect = _dialect(op)
    dialect.set_fill_factor(op, "hookinbox_events", 50)
    dialect.set_fill_factor(op, "hookinbox_event_queue", 30)


def _v11_received_via(op: Operations) -> None:
    """`hookinbox_events.received_via`: `webhook` for every event stored so far, `reconcile`
    for those `hookinbox reconcile` finds in a provider's API before any delivery.

    A column with a constant default is a catalog change on each database (PostgreSQL 11 and
    later store the default once instead of rewriting the table; SQLite only edits the
    table's definition): one short step however large the inbox.
    """
    _dialect(op).add_column_with_default(
        op, "hookinbox_events", sa.Column("received_via", sa.String(16), nullable=False), "webhook"
    )


def _dialect(op: Operations) -> Dialect:
    return dialect_named(op.get_context().dialect.name)


MIGRATIONS: tuple[Step, ...] = (
    _v1_events,
    _v2_outbox,
    _v3_sessions_and_forced_replays,
    _v4_audit,
    _v5_attempts_history,
    _v6_workers,
    _v7_outbox_trace_context,
    _v8_due_in_lease_order,
    _v9_queue_beside_the_events,
    _v10_room_for_processing,
    _v11_received_via,
)
"""Step N (1-based) brings a database from version N-1 to version N."""

LATEST_VERSION = len(MIGRATIONS)


def current_version(connection: Connection) -> int:
    if not sa.inspect(connection).has_table(schema_versions.name):
        return 0
    version = connection.execute(sa.select(sa.func.max(schema_versions.c.version))).scalar()
    return int(version or 0)


def migrate(
    engine: Engine, after: Sequence[AfterMigrate] = (), *, target: int = LATEST_VERSION
) -> tuple[int, int]:
    """Bring the schema to `target` (the latest version); returns (version before, after).

    `after` callbacks run in the same transaction once hookinbox's steps are applied: an
    application may create its own tables there (the bundled examples do). A database already
    past `target` is left as it is (a Django migration pinned to an older version).
    """
    if not 0 < target <= LATEST_VERSION:
        raise ConfigurationError(f"no schema version {target}: versions go 1 to {LATEST_VERSION}")
    with translate_errors():
        # Schema 9's copy of the open events, outside the step's lock (nothing to copy
        # otherwise); then the steps, their lock waits bounded (`_lock_waits.py`).
        copy_open_events(engine, target)
        return patiently(engine, lambda wait: _apply(engine, after, target, wait))


def _apply(
    engine: Engine, after: Sequence[AfterMigrate], target: int, wait: float | None
) -> tuple[int, int]:
    with engine.begin() as connection:
        dialect = dialect_named(connection.dialect.name)
        dialect.lock_for_migration(connection)
        if wait is not None:
            dialect.limit_lock_waits(connection, wait)
        schema_versions.create(connection, checkfirst=True)
        before = current_version(connection)
        if before > LATEST_VERSION:
            raise ConfigurationError(
                f"the database schema is version {before}, newer than this hookinbox "
                f"understands ({LATEST_VERSION}); upgrade hookinbox"
            )
        from alembic.operations import Operations
        from alembic.runtime.migration import MigrationContext

        operations = Operations(MigrationContext.configure(connection))
        for version in range(before + 1, target + 1):
            MIGRATIONS[version - 1](operations)
            connection.execute(
                schema_versions.insert().values(version=version, applied_at=datetime.now(UTC))
            )
        for callback in after:
            callback(connection)
        return before, max(before, target)


def check_version(engine: Engine) -> int:
    """The schema version, or ConfigurationError when it is not the one this code expects."""
    with translate_errors(), engine.connect() as connection:
        # Read-only: on SQLite, an operator command must not queue for the write lock that a
        # worker's transaction holds while its handler runs just to read the version.
        connection.execution_options(**{READ_ONLY: True})
        version = current_version(connection)
    if version != LATEST_VERSION:
        raise ConfigurationError(
            f"the database schema is version {version}, this hookinbox needs {LATEST_VERSION}: "
            "run `hookinbox migrate`"
        )
    return version
