"""Versioned, in-place schema upgrades, safe when several processes start at once.

Each step is frozen once released: it states the DDL of its own version (never the live
tables of `_schema.py`, which move on), through Alembic's operations so that SQLite's
limited ALTER TABLE is handled for us. We keep our own small runner instead of an Alembic
environment because hookinbox migrates itself from `serve` and from library calls, with no
configuration files in the user's project, and must serialise concurrent starts: PostgreSQL
takes an advisory lock, SQLite's BEGIN IMMEDIATE already admits one writer, MariaDB a named
lock. Schema 9's copy of the open events and schema 14's of the payloads are made before the
steps' transaction, in short ones of its own (`_queue_copy.py`, `_payload_copy.py`), so that
the step's lock never covers them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy import Connection, Engine

from hookinbox._errors import ConfigurationError
from hookinbox._logging import logger
from hookinbox._storage._compatibility import (
    RECORDED_FROM,
    Kind,
    Migration,
    Planned,
    SchemaStatus,
    State,
    oldest_code,
    read_status,
)
from hookinbox._storage._dialects import Dialect, dialect_of
from hookinbox._storage._dialects._partial import partial
from hookinbox._storage._dialects._table_options import row_id_type
from hookinbox._storage._errors import translate_errors
from hookinbox._storage._lock_waits import patiently
from hookinbox._storage._options import READ_ONLY
from hookinbox._storage._outbox_queue import (
    OUTBOX_FILLFACTOR,
    copy_open_messages,
)
from hookinbox._storage._outbox_queue import create_queue_table as create_outbox_queue_table
from hookinbox._storage._payload_copy import copy_payloads, create_payloads_table, finish_copy
from hookinbox._storage._queue_copy import copy_open_events, create_queue_table
from hookinbox._storage._queue_copy import finish_copy as finish_queue_copy
from hookinbox._storage._schema import schema_versions
from hookinbox._storage._types import LongBinary, LongText, UTCDateTime

if TYPE_CHECKING:  # alembic costs 0.1 s to import: only a migration pays it
    from alembic.operations import Operations

AfterMigrate = Callable[[Connection], None]
EXPAND, CONTRACT = Kind.EXPAND, Kind.CONTRACT
log = logger("hookinbox._storage")

# The table as schema 1 made it: the runner creates it before any step, and schema 12's step
# adds its last column (the live table, `_schema.py`, has it already).
_FIRST_VERSIONS = sa.Table(
    schema_versions.name,
    sa.MetaData(),
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("applied_at", UTCDateTime, nullable=False),
)


def _v1_events(op: Operations) -> None:
    row_id = row_id_type()
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
        **partial(waiting),
    )
    op.create_index(
        "ix_hookinbox_events_leased",
        "hookinbox_events",
        ["lease_expires_at"],
        **partial(leased),
    )
    op.create_index("ix_hookinbox_events_received_at", "hookinbox_events", ["received_at"])
    open_events = sa.text("status NOT IN ('processed', 'unhandled')")
    op.create_index(
        "ix_hookinbox_events_open",
        "hookinbox_events",
        ["status", "received_at"],
        **partial(open_events),
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
    row_id = row_id_type()
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
        **partial(due),
    )
    op.create_index(
        "ix_hookinbox_outbox_leased",
        "hookinbox_outbox",
        ["lease_expires_at"],
        **partial(leased),
    )
    op.create_index(
        "ix_hookinbox_outbox_ordering",
        "hookinbox_outbox",
        ["ordering_key", "id"],
        **partial(unsent),
    )
    op.create_index("ix_hookinbox_outbox_created_at", "hookinbox_outbox", ["created_at"])
    not_delivered = sa.text("status <> 'delivered'")
    op.create_index(
        "ix_hookinbox_outbox_open",
        "hookinbox_outbox",
        ["status"],
        **partial(not_delivered),
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
    row_id = row_id_type()
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
    finish_queue_copy(op)
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


def _v12_min_code_version(op: Operations) -> None:
    """`hookinbox_schema_versions.min_code_version`: with each version applied, the oldest
    code (by its schema version) that runs on the database (`_compatibility.py`), so that a
    hookinbox older than the database can tell whether it may run instead of refusing every
    newer schema. The rows applied before are given what their steps' classification says:
    schema 9 made older processes fail closed (its trigger refuses their leases).

    The column is added only if missing: a rollback to a hookinbox before schema 12 deletes
    this version's row and leaves the column (docs/upgrading.md), and the step runs again.
    """
    columns = sa.inspect(op.get_bind()).get_columns("hookinbox_schema_versions")
    if not any(column["name"] == "min_code_version" for column in columns):
        op.add_column("hookinbox_schema_versions", sa.Column("min_code_version", sa.Integer))
    op.execute(
        "UPDATE hookinbox_schema_versions"
        " SET min_code_version = CASE WHEN version >= 9 THEN 9 ELSE 1 END"
    )


def _v13_learned_secrets(op: Operations) -> None:
    """`hookinbox_learned_secrets` and `hookinbox_trust_windows`: the secrets a source learns
    from a first handshake (Asana's `X-Hook-Secret`), and the windows an operator opens for
    one. Two new tables, which older code never reads; each created only if missing: a
    rollback before schema 12 deletes this version's row and leaves them (docs/upgrading.md),
    and the step runs again."""
    existing = sa.inspect(op.get_bind())
    if not existing.has_table("hookinbox_learned_secrets"):
        op.create_table(
            "hookinbox_learned_secrets",
            sa.Column("source", sa.String(64), primary_key=True),
            sa.Column("secret", sa.String(255), primary_key=True),
            sa.Column("learned_at", UTCDateTime, nullable=False),
        )
    if not existing.has_table("hookinbox_trust_windows"):
        op.create_table(
            "hookinbox_trust_windows",
            sa.Column("source", sa.String(64), primary_key=True),
            sa.Column("closes_at", UTCDateTime, nullable=False),
        )


def _v14_payloads_beside_the_events(op: Operations) -> None:
    """Each event's body and headers move to a write-once table of their own,
    `hookinbox_payloads`, so that the events row processing rewrites is ~270 bytes
    (docs/storage.md, "Upgrading to schema 14"). The fill factor stays schema 10's 50 %:
    measured again for the narrow row, less room cost more bytes ("Bytes per event").

    The payloads are copied before this step, in short transactions while older processes go
    on (`_payload_copy.py`); the step locks the events table (PostgreSQL: it waits for the
    transactions already writing it, then holds new ones for the step's milliseconds),
    copies what is above the copy's position (everything where no copy ran: a new inbox,
    Django's migrations) and drops the events' `body` and `headers`. A contract step:
    processes of schema 13 cannot store or read events without those columns, and refuse to
    start on this schema (`min_code_version` 14); one still running fails its statements
    (a delivery is answered 5xx, and the provider sends it again).
    """
    dialect = _dialect(op)
    dialect.lock_tables(op, "hookinbox_events")
    create_payloads_table(op)
    finish_copy(op)


def _v15_outbox_queue_beside_the_messages(op: Operations) -> None:
    """The relay's unfinished work moves to a narrow table of its own,
    `hookinbox_outbox_queue`, so that delivering a message no longer updates any indexed
    column of `hookinbox_outbox` (its updates heap-only on PostgreSQL, as schema 9 made the
    events': docs/storage.md, "Upgrading to schema 15").

    Short whatever the size of the outbox: under the table's lock, the messages not delivered
    (the backlog, read through the open index) are copied, the trigger that queues every
    message inserted is created (an older handler's messages are queued too), the indexes on
    `status` are dropped, and the fill factors change pages written from now on. A relay of an
    older hookinbox fails closed afterwards: its lease is refused by a trigger (nothing is
    sent by two relays at once). Each statement finds what it makes, if it exists already
    (MariaDB, whose DDL commits on its own: a step cut short).
    """
    dialect = _dialect(op)
    dialect.lock_tables(op, "hookinbox_outbox")
    create_outbox_queue_table(op)
    copy_open_messages(op)
    dialect.queue_new_messages(op)
    dialect.refuse_old_relays(op)
    for index in (
        "ix_hookinbox_outbox_due_order",
        "ix_hookinbox_outbox_ordering",
        "ix_hookinbox_outbox_open",
    ):
        dialect.drop_index_if_exists(op, "hookinbox_outbox", index)
    dialect.set_fill_factor(op, "hookinbox_outbox", OUTBOX_FILLFACTOR)


def _v16_paused_sources(op: Operations) -> None:
    """`hookinbox_paused_sources`: the sources whose processing an operator (or the
    auto-pause) paused, and the queue state `paused` their leased events are parked in. A new
    table older code never reads (an older worker processes a paused source's events: pause
    only with every worker upgraded, docs/operations.md); created only if missing, as schema
    13's tables."""
    if not sa.inspect(op.get_bind()).has_table("hookinbox_paused_sources"):
        op.create_table(
            "hookinbox_paused_sources",
            sa.Column("source", sa.String(64), primary_key=True),
            sa.Column("paused_at", UTCDateTime, nullable=False),
            sa.Column("actor", sa.String(255), nullable=False),
            sa.Column("reason", LongText),
        )


def _dialect(op: Operations) -> Dialect:
    return dialect_of(op.get_context().dialect)


MIGRATIONS: tuple[Migration, ...] = (
    Migration(_v1_events, EXPAND, "the events, deliveries, jobs and ordering tables"),
    Migration(_v2_outbox, EXPAND, "the outbox table"),
    Migration(_v3_sessions_and_forced_replays, EXPAND, "revoked sessions; forced_replay_at"),
    Migration(_v4_audit, EXPAND, "the audit table"),
    Migration(_v5_attempts_history, EXPAND, "attempts_before_replay"),
    Migration(_v6_workers, EXPAND, "the workers' heartbeats table"),
    Migration(_v7_outbox_trace_context, EXPAND, "the outbox's trace_context"),
    Migration(_v8_due_in_lease_order, EXPAND, "the due indexes in lease order"),
    Migration(_v9_queue_beside_the_events, CONTRACT, "the queue beside the events"),
    Migration(_v10_room_for_processing, EXPAND, "fill factors: room for processing"),
    Migration(_v11_received_via, EXPAND, "received_via"),
    Migration(_v12_min_code_version, EXPAND, "the oldest code each version runs with"),
    Migration(_v13_learned_secrets, EXPAND, "secrets learned on first use; trust windows"),
    Migration(_v14_payloads_beside_the_events, CONTRACT, "payloads beside the events"),
    Migration(_v15_outbox_queue_beside_the_messages, CONTRACT, "the queue beside the outbox"),
    Migration(_v16_paused_sources, EXPAND, "paused sources"),
)
"""Step N (1-based) brings a database from version N-1 to version N. Each is classified
(docs/upgrading.md): a contract step is one after which code of an older schema no longer
works correctly; an expand step only adds what older code does not see."""

LATEST_VERSION = len(MIGRATIONS)


def current_version(connection: Connection) -> int:
    return read_status(connection, LATEST_VERSION).version


def schema_status(engine: Engine) -> SchemaStatus:
    """Where the database stands for this code, read without writing anything."""
    with translate_errors(), engine.connect() as connection:
        # Read-only: on SQLite, an operator command must not queue for the write lock that a
        # worker's transaction holds while its handler runs just to read the version.
        connection.execution_options(**{READ_ONLY: True})
        return read_status(connection, LATEST_VERSION)


def plan(version: int) -> list[Planned]:
    """The steps a database at `version` would run."""
    return [
        Planned(number, MIGRATIONS[number - 1].kind, MIGRATIONS[number - 1].title,
                oldest_code(MIGRATIONS, number))
        for number in range(version + 1, LATEST_VERSION + 1)
    ]  # fmt: skip


def migrate(
    engine: Engine, after: Sequence[AfterMigrate] = (), *, target: int = LATEST_VERSION
) -> tuple[int, int]:
    """Bring the schema to `target` (the latest version); returns (version before, after).

    `after` callbacks run in the same transaction once hookinbox's steps are applied: an
    application may create its own tables there (the bundled examples do). A database already
    past `target` is left as it is (a Django migration pinned to an older version); one past
    this code's version is run on if it records that this code may (`_compatibility.py`),
    and refused otherwise.
    """
    if not 0 < target <= LATEST_VERSION:
        raise ConfigurationError(f"no schema version {target}: versions go 1 to {LATEST_VERSION}")
    with translate_errors():
        # Schema 9's copy of the open events and schema 14's of the payloads, outside the
        # steps' lock (nothing to copy otherwise); then the steps, their lock waits bounded
        # (`_lock_waits.py`).
        copy_open_events(engine, target)
        copy_payloads(engine, target)
        return patiently(engine, lambda wait: _apply(engine, after, target, wait))


def _apply(
    engine: Engine, after: Sequence[AfterMigrate], target: int, wait: float | None
) -> tuple[int, int]:
    with engine.begin() as connection:
        dialect = dialect_of(connection)
        dialect.lock_for_migration(connection)
        if wait is not None:
            dialect.limit_lock_waits(connection, wait)
        _FIRST_VERSIONS.create(connection, checkfirst=True)
        status = read_status(connection, LATEST_VERSION)
        before = status.version
        _refuse_or_warn(status)
        from alembic.operations import Operations
        from alembic.runtime.migration import MigrationContext

        operations = Operations(MigrationContext.configure(connection))
        for version in range(before + 1, target + 1):
            MIGRATIONS[version - 1].step(operations)
            row = {"version": version, "applied_at": datetime.now(UTC)}
            if version >= RECORDED_FROM:
                row["min_code_version"] = oldest_code(MIGRATIONS, version)
            connection.execute(schema_versions.insert().values(**row))
        for callback in after:
            callback(connection)
        return before, max(before, target)


def check_version(engine: Engine) -> int:
    """The schema version, or ConfigurationError when this code may not run on it: older than
    this code's, or newer and not recording that this code may run on it."""
    status = schema_status(engine)
    if status.state is State.PENDING:
        raise ConfigurationError(
            f"the database schema is version {status.version}, this hookinbox needs "
            f"{LATEST_VERSION}: run `hookinbox migrate`"
        )
    _refuse_or_warn(status)
    return status.version


def _refuse_or_warn(status: SchemaStatus) -> None:
    if status.state is State.NEWER_INCOMPATIBLE:
        raise ConfigurationError(status.describe())
    if status.state is State.NEWER_COMPATIBLE:
        # A rolling upgrade's older hosts, or a rollback: it works, and it should not last.
        log.warning("%s (docs/upgrading.md)", status.describe())
