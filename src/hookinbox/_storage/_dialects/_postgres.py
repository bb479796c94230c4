"""PostgreSQL (psycopg 3): a pooled server, concurrent writers, LISTEN/NOTIFY.

The engine sets libpq's TCP timeouts so that a silent server is given up in seconds, refuses a
database not encoded UTF8, and counts a write refused by a read-only server as a lost
connection (a standby reached after a failover: 503, not 500), and marks a deadlock's victim
(40P01) so that a transaction of hookinbox's own runs again (`Store.retry_deadlocks`). Group
commit's batch is ONE
statement (a data-modifying CTE) run in autocommit. Payload search reads the body as JSONB.
Workers are woken by NOTIFY from triggers; the pruner reads `pg_stat_activity` to see who else
is working.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import time
import uuid
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar

import sqlalchemy as sa
from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.dialects import postgresql, registry
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.dialects.postgresql.psycopg import PGDialect_psycopg
from sqlalchemy.engine import URL, ExceptionContext

from hookinbox._errors import ConfigurationError, StoreUnavailable
from hookinbox._extras import require
from hookinbox._records import Pressure, UniqueViolation
from hookinbox._storage._batch import (
    EVENT_COLUMNS,
    ON_CONFLICT,
    Group,
    Row,
    delivery_error,
    delivery_status,
    headers_json,
)
from hookinbox._storage._dialects._base import Dialect, Upsert
from hookinbox._storage._dialects._borrowed import DRIVER, OwnsNoTransactions
from hookinbox._storage._dialects._postgres_listen import listen
from hookinbox._storage._errors import (
    NOT_MINE,
    ErrorReader,
    NotMine,
    ReadsNothing,
    mark_deadlock,
    name_unique_violation,
)
from hookinbox._storage._options import HIDE_PARAMETERS, StoreOptions
from hookinbox._storage._schema import events

if TYPE_CHECKING:
    from alembic.operations import Operations
    from sqlalchemy.ext.asyncio import AsyncEngine

    from hookinbox._model import NewDelivery
    from hookinbox._records import PayloadMatch
    from hookinbox._storage._transactions import Transactions

OLD_LEASE = "hookinbox schema 9: a process of an older hookinbox tried to lease; upgrade it"
REQUIRED_ENCODING = "UTF8"
READ_ONLY_SQL_TRANSACTION = "25006"
DEADLOCK_DETECTED = "40P01"
KEEPALIVE_PROBES = 3
ADVISORY_LOCK_KEY = 0x686F6F6B696E
LOCK_NOT_AVAILABLE = "55P03"
"""The SQLSTATE of a lock wait that `lock_timeout` ended."""
"""An arbitrary constant naming hookinbox's migration lock among the application's own locks."""
_IN_ERROR = 3
UNIQUE_VIOLATION = "23505"
_ABORTED = (
    "the processing transaction was aborted by an earlier database error (one a handler "
    "caught and went on): rolled back, to be retried"
)
_FAILED_STATEMENT = "hookinbox_failed_statement"
"""Set in a connection's `info` when a statement failed on the server in its transaction
(asyncpg, whose transaction state is private: `refuse_aborted`)."""
"""libpq's PQTRANS_INERROR, as psycopg 3 and psycopg2 report `info.transaction_status`."""

# Django's own OPTIONS for PostgreSQL; the rest are libpq parameters the LISTEN connection needs.
_DJANGO_OPTIONS = frozenset(
    {"isolation_level", "server_side_binding", "pool", "assume_role", "cursor_factory"}
)


_KEY_DETAIL = re.compile(r"Key \((?P<columns>.+?)\)=")


def key_columns(detail: str | None) -> frozenset[str]:
    """The columns a unique violation's DETAIL names ("Key (a, b)=(1, 2) ...")."""
    match = _KEY_DETAIL.search(detail or "")
    return frozenset(c.strip() for c in match["columns"].split(",")) if match else frozenset()


class PostgresErrors(ReadsNothing):
    """What psycopg's errors mean (asyncpg's are named by the engine's error handler,
    `_name_unique_violation`, while its own error is at hand)."""

    def unique_violation(self, original: BaseException) -> UniqueViolation | NotMine | None:
        """psycopg's `diag` names the table and constraint, its DETAIL the columns."""
        diag = getattr(original, "diag", None)
        if diag is None:
            return NOT_MINE
        if getattr(original, "sqlstate", None) != UNIQUE_VIOLATION:
            return None
        columns = key_columns(diag.message_detail)
        return UniqueViolation(diag.table_name, columns, diag.constraint_name)


class PostgreSQL(Dialect):
    name: ClassVar[str] = "postgresql"
    single_writer: ClassVar[bool] = False
    listens: ClassVar[bool] = True
    returns_joined_rows: ClassVar[bool] = True
    autocommit_batches: ClassVar[bool] = True
    prune_busy_batch_seconds: ClassVar[float] = 0.02
    django_vendors: ClassVar[tuple[str, ...]] = ("postgresql",)
    errors: ClassVar[ErrorReader] = PostgresErrors()
    # asyncpg, or psycopg's own async mode; hookinbox's own work stays on psycopg (sync).
    async_drivers: ClassVar[Mapping[str, str]] = {
        "asyncpg": "asyncpg",
        "psycopg_async": "postgres-async",
    }

    # -- engines and URLs -------------------------------------------------------------------

    def normalize_url(self, url: URL) -> URL:
        # The driver: psycopg, with the async one the URL names where it names one.
        extra = self.async_drivers.get(url.drivername.partition("+")[2], "postgres")
        require(f"a {url.drivername}:// database URL", extra)
        if url.drivername.partition("+")[2] == DRIVER:  # `postgres://` names no dialect
            return url
        url = url.set(drivername="postgresql+psycopg")
        if _several_hosts(url) and "target_session_attrs" not in url.query:
            # Several hosts are a primary and its standbys: hookinbox writes on every
            # connection, so only the primary will do (a URL may still say otherwise).
            url = url.update_query_dict({"target_session_attrs": "read-write"})
        return url

    def build_engine(self, url: URL, options: StoreOptions) -> Engine:
        return _engine(url, options)

    def async_url(self, url: URL) -> URL | None:
        if super().async_url(url) is None:
            return None
        if _several_hosts(url) and "target_session_attrs" not in url.query:
            url = url.update_query_dict({"target_session_attrs": "read-write"})
        return url

    def build_async_engine(self, url: URL, options: StoreOptions) -> AsyncEngine:
        return _async_engine(url, options)

    def missing_database(self, url: URL) -> str | None:
        """The server says so at the first connection (one line, exit 2)."""
        return None

    def read_only_engine(self, url: URL) -> Engine:
        # Every transaction on it is begun read-only by the caller (postgresql_readonly).
        return _engine(url, StoreOptions())

    def listen_params(self, engine: Engine, options: StoreOptions) -> dict[str, Any]:
        """psycopg's connection parameters for a connection outside the pool (LISTEN).

        Taken from SQLAlchemy's own translation of the URL, so that every host list it
        accepts (`?host=h1:5432&host=h2:5432` above all, which libpq itself reads as one
        host named `h2:5432`) reaches the listener exactly as it reaches the pool.
        """
        _, params = engine.dialect.create_connect_args(engine.url)
        params.pop("context", None)  # SQLAlchemy's type adapters: the listener reads no rows
        return {**params, **_connect_args(engine.url, options)}

    listen = staticmethod(listen)  # LISTEN on a psycopg connection of its own

    @contextlib.contextmanager
    def scratch_database(self, url: URL) -> Iterator[str]:
        """A new schema `hookinbox_test_<random>` in that database (its user needs CREATE
        there), first on the returned URL's `search_path`, so that hookinbox's tables and the
        application's unqualified ones are made in it; dropped with everything in it at the
        end. A schema costs milliseconds where a database costs a second."""
        schema = f"hookinbox_test_{uuid.uuid4().hex[:12]}"
        admin = sa.create_engine(url, isolation_level="AUTOCOMMIT", poolclass=sa.NullPool)
        try:
            with admin.connect() as connection:
                connection.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
            try:
                given = url.query.get("options")
                given = " ".join(given) if isinstance(given, tuple) else given
                options = " ".join(filter(None, [given, f"-csearch_path={schema}"]))
                scoped = url.update_query_dict({"options": options})
                yield scoped.render_as_string(hide_password=False)
            finally:
                _drop_scratch_schema(admin, schema)
        finally:
            admin.dispose()

    # -- transactions -----------------------------------------------------------------------

    @contextlib.contextmanager
    def housekeeping(self, store: Transactions) -> Iterator[Connection]:
        with store.transaction() as connection:
            yield connection

    def refuse_aborted(self, connection: Connection) -> None:
        """A PostgreSQL error that a handler caught and ignored aborted the transaction:
        PostgreSQL would answer the COMMIT with a rollback, and the attempt would pass for a
        success. psycopg (sync or async) tells from its connection state; asyncpg keeps that
        state private, so the engine's error handler marks the connection with the transaction
        or savepoint in which a statement failed on the server, aborted while that is still
        active (`_watch`). No round trip either way. (A statement sent on asyncpg's own
        connection, around SQLAlchemy, is not seen.)"""
        info = getattr(connection.connection.driver_connection, "info", None)
        if info is not None:
            aborted = getattr(info, "transaction_status", None) == _IN_ERROR
        else:
            mark = connection.connection.info.get(_FAILED_STATEMENT)
            failed_in = mark() if mark is not None else None
            aborted = failed_in is not None and failed_in.is_active
        if aborted:
            raise RuntimeError(_ABORTED)

    def check_writable(self, connection: Connection) -> None:
        if connection.exec_driver_sql("SHOW transaction_read_only").scalar() == "on":
            connection.invalidate()  # the next session may find the (new) primary
            raise StoreUnavailable(
                "database unavailable: the server is read-only (a standby, or "
                "default_transaction_read_only is on)"
            )

    def limit_statements(
        self, connection: Connection, seconds: float, *, local: bool = False
    ) -> None:
        milliseconds = max(1, round(seconds * 1000))
        scope = "LOCAL " if local else ""
        connection.exec_driver_sql(f"SET {scope}statement_timeout = {milliseconds}")

    def lock_for_migration(self, connection: Connection) -> None:
        connection.execute(sa.select(sa.func.pg_advisory_xact_lock(ADVISORY_LOCK_KEY)))

    def limit_lock_waits(self, connection: Connection, seconds: float) -> None:
        connection.exec_driver_sql(f"SET LOCAL lock_timeout = {max(1, round(seconds * 1000))}")

    def gave_up_waiting(self, error: BaseException) -> bool:
        seen: BaseException | None = error
        while seen is not None:
            original = getattr(seen, "orig", None) or seen
            if getattr(original, "sqlstate", None) == LOCK_NOT_AVAILABLE:
                return True
            seen = seen.__cause__
        return False

    def lock_for_copy(self, connection: Connection) -> None:
        """The migration lock, shared: copies run beside each other, never beside a step."""
        connection.execute(sa.select(sa.func.pg_advisory_xact_lock_shared(ADVISORY_LOCK_KEY)))

    # -- statements -------------------------------------------------------------------------

    def insert(self, table: sa.TableClause) -> Upsert:
        return PostgresUpsert(table)

    def write_batch(
        self, connection: Connection, deliveries: Sequence[NewDelivery], groups: list[Group]
    ) -> dict[tuple[str, str], Row]:
        rows: list[dict[str, object]] = []
        log: list[dict[str, object]] = []
        bodies: list[bytes] = []
        offset = 1  # SQL's substring counts from 1
        for group in groups:
            first = group.first
            folded = len(group.members)
            rows.append(
                {
                    "s": first.source,
                    "i": first.event_id,
                    "t": first.event_type,
                    "o": _iso(first.occurred_at),
                    "r": first.received_at.isoformat(),
                    "bo": offset,
                    "bn": len(first.body),
                    "h": headers_json(first.headers),
                    "d": first.body_sha256,
                    "st": delivery_status(first),
                    "c": folded,
                    "l": group.last_delivery_at.isoformat(),
                    "e": delivery_error(first),
                }
            )
            bodies.append(first.body)
            offset += len(first.body)
            for position, index in enumerate(group.members, start=1):
                log.append(
                    {
                        "s": first.source,
                        "i": first.event_id,
                        "r": deliveries[index].received_at.isoformat(),
                        "p": position,
                        "f": folded,
                        "d": first.body_sha256,
                    }
                )
        parameters = {"events": json.dumps([rows, log]), "bodies": b"".join(bodies)}
        result = connection.exec_driver_sql(_BATCH, parameters)
        return {(r[1], r[2]): (r[0], r[3], r[4], r[5], r[6] == "webhook") for r in result}

    def payload_value(self, match: PayloadMatch, *, careful: bool = False) -> sa.ColumnElement[Any]:
        """Only bodies that start with `{` or `[` are read as JSON (form bodies, Twilio's or
        Slack's, start with a field name). PostgreSQL 15 has no cast to jsonb that fails
        softly, and jsonb refuses what Python's parser (every source's) accepts: the escape
        \\u0000 and lone surrogate escapes, the tokens NaN and Infinity (and an exponent past
        numeric's range), UTF-16 and UTF-32 text. `careful` casts a body only when patterns
        say jsonb will read it (bound parameters, like the path): 5,000 bodies of 1.5 KB took
        0.96 s to check against 0.14 s to search, so a search runs without the checks first
        and only a window holding such a body (the cast failed) is searched again with them
        (`Operator.list_events`)."""
        body = events.c.body
        text = sa.func.convert_from(body, "UTF8")

        def matches(value: sa.ColumnElement[str], pattern: str) -> sa.ColumnElement[bool]:
            return value.op("~")(sa.literal(pattern, sa.Text))

        def without(pattern: str, replacement: str) -> sa.ColumnElement[str]:
            return sa.func.regexp_replace(
                text, sa.literal(pattern, sa.Text), sa.literal(replacement, sa.Text), "g"
            )

        document = sa.cast(text, JSONB)
        found = document.op("#>>", return_type=sa.Text)(
            sa.bindparam("payload_path", list(match.path), type_=ARRAY(sa.Text))
        )
        first = sa.func.substring(body, 1, 1)
        looks_json = first.in_([sa.literal(b"{", sa.LargeBinary), sa.literal(b"[", sa.LargeBinary)])
        if not careful:
            return sa.case((looks_json, found), else_=None)
        lone_escape = sa.case(
            (matches(text, _SUSPECT_ESCAPE), matches(without(_ESCAPES_READ, ""), _SUSPECT_ESCAPE)),
            else_=False,
        )
        bare_token = sa.case(
            (matches(text, _SUSPECT_TOKEN), matches(without(_STRINGS, '""'), _SUSPECT_TOKEN)),
            else_=False,
        )
        has_nul = sa.func.position(sa.literal(_NUL_BYTE, sa.LargeBinary).op("IN")(body)) > 0
        # A CASE, whose branches PostgreSQL evaluates in order: no cast before its checks.
        return sa.case(
            (sa.not_(looks_json), None),
            (has_nul, None),
            (lone_escape, None),
            (bare_token, None),
            else_=found,
        )

    def time_bucket(
        self, column: sa.ColumnElement[Any], start: datetime, width: timedelta
    ) -> sa.ColumnElement[Any]:
        from hookinbox._storage._types import UTCDateTime

        elapsed = sa.extract("epoch", column - sa.literal(start, UTCDateTime()))
        return sa.func.floor(elapsed / width.total_seconds())

    def check_row_size(self, connection: Connection, delivery: NewDelivery) -> None:
        """A row is sent as parameters, outside the statement's text: no packet to fit."""

    def check_body_limit(self, store: Transactions, max_body_size: int) -> None:
        """Nothing asked: a body is a parameter, outside the statement's text (bytea holds
        1 GB at most, a bound not checked here)."""

    def notify(self, connection: Connection, channel: str) -> None:
        connection.execute(sa.select(sa.func.pg_notify(channel, "")))

    # -- the database's own state -----------------------------------------------------------

    def now(self, connection: Connection) -> datetime:
        """The server's `now()` (the transaction's start)."""
        now: datetime = connection.execute(sa.select(sa.func.now())).scalar_one()
        return now.astimezone(UTC)

    def pressure_mark(self, connection: Connection) -> object:
        return connection.execute(_NOW).scalar_one()

    def pressure_since(self, connection: Connection, mark: object) -> Pressure:
        # pg_stat_activity is live (unlike the cumulative statistics, flushed about once a
        # second), and read once per transaction: the caller ends the transaction after.
        others, waiting = connection.execute(_OTHERS, {"since": mark}).one()
        return Pressure(int(others), int(waiting))

    # Space after a prune: autovacuum makes it reusable (docs/storage.md has what to tune).

    def checkpoint_passive(self, store: Transactions) -> None:
        """PostgreSQL's checkpointer runs on its own."""

    def free_pages(self, store: Transactions) -> int:
        return 0

    def give_back_pages(self, store: Transactions, pages: int) -> int:
        return 0

    # -- migrations -------------------------------------------------------------------------

    def create_notify_trigger(
        self, op: Operations, table: str, channel: str, function: str
    ) -> None:
        # Wake idle workers (LISTEN) the moment a row commits, with no extra round trip on
        # the writing path: the server raises the notification itself.
        trigger = f"{table}_notify"
        op.execute(
            f"CREATE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS "
            f"$$ BEGIN PERFORM pg_notify('{channel}', ''); RETURN NULL; END $$"
        )
        op.execute(
            f"CREATE TRIGGER {trigger} AFTER INSERT ON {table} "
            f"FOR EACH ROW EXECUTE FUNCTION {function}()"
        )

    def lock_tables(self, op: Operations, *tables: str) -> None:
        op.execute(f"LOCK TABLE {', '.join(tables)} IN ACCESS EXCLUSIVE MODE")

    def set_fill_factor(self, op: Operations, table: str, percent: int) -> None:
        op.execute(f"ALTER TABLE {table} SET (fillfactor = {int(percent)})")

    def queue_new_events(self, op: Operations) -> None:
        # One call per statement, not per row: a group-commit batch queues its new events in
        # one INSERT ... SELECT from the statement's inserted rows (its transition table; the
        # rows an ON CONFLICT updated are not in it), and notifies once. It replaces the
        # notifying trigger of schema 1 (the same channel, so older workers are woken still).
        op.execute(
            "CREATE OR REPLACE FUNCTION hookinbox_queue_new_events() RETURNS trigger"
            " LANGUAGE plpgsql AS $$"
            " BEGIN"
            " INSERT INTO hookinbox_event_queue"
            " (id, state, next_attempt_at, received_at, attempts)"
            " SELECT id, status, next_attempt_at, received_at, attempts"
            " FROM hookinbox_inserted_events WHERE status NOT IN ('processed', 'unhandled');"
            " IF EXISTS (SELECT 1 FROM hookinbox_inserted_events"
            " WHERE status IN ('pending', 'deferred')) THEN"
            " PERFORM pg_notify('hookinbox_events', ''); END IF;"
            " RETURN NULL; END $$"
        )
        _unless_trigger_exists(
            op,
            "hookinbox_events_queue",
            "DROP TRIGGER IF EXISTS hookinbox_events_notify ON hookinbox_events;"
            " CREATE TRIGGER hookinbox_events_queue AFTER INSERT ON hookinbox_events"
            " REFERENCING NEW TABLE AS hookinbox_inserted_events"
            " FOR EACH STATEMENT EXECUTE FUNCTION hookinbox_queue_new_events();",
        )
        op.execute("DROP FUNCTION IF EXISTS hookinbox_notify_new_event()")

    def mirror_queue_changes(self, op: Operations) -> None:
        # A row trigger on the columns the queue copies: an upsert of a duplicate delivery
        # (which sets none of them) fires nothing. `done` is `_queue_copy.TOMBSTONE`.
        op.execute(
            "CREATE OR REPLACE FUNCTION hookinbox_mirror_event() RETURNS trigger"
            " LANGUAGE plpgsql AS $$"
            " BEGIN"
            " IF TG_OP = 'UPDATE' AND NEW.status NOT IN ('processed', 'unhandled') THEN"
            " INSERT INTO hookinbox_event_queue"
            " (id, state, next_attempt_at, received_at, attempts)"
            " VALUES (NEW.id,"
            " CASE WHEN NEW.status = 'processing' THEN 'pending' ELSE NEW.status END,"
            " NEW.next_attempt_at, NEW.received_at, NEW.attempts)"
            " ON CONFLICT (id) DO UPDATE SET state = EXCLUDED.state,"
            " next_attempt_at = EXCLUDED.next_attempt_at, received_at = EXCLUDED.received_at,"
            " attempts = EXCLUDED.attempts;"
            " ELSIF OLD.status NOT IN ('processed', 'unhandled') THEN"
            " INSERT INTO hookinbox_event_queue"
            " (id, state, next_attempt_at, received_at, attempts)"
            " VALUES (OLD.id, 'done', OLD.next_attempt_at, OLD.received_at, OLD.attempts)"
            " ON CONFLICT (id) DO UPDATE SET state = 'done';"
            " END IF;"
            " RETURN NULL; END $$"
        )
        _unless_trigger_exists(
            op,
            "hookinbox_events_mirror",
            "CREATE TRIGGER hookinbox_events_mirror"
            " AFTER UPDATE OF status, next_attempt_at, attempts, received_at OR DELETE"
            " ON hookinbox_events FOR EACH ROW EXECUTE FUNCTION hookinbox_mirror_event();",
        )

    def stop_mirroring_queue(self, op: Operations) -> None:
        op.execute("DROP TRIGGER IF EXISTS hookinbox_events_mirror ON hookinbox_events")
        op.execute("DROP FUNCTION IF EXISTS hookinbox_mirror_event()")

    def refuse_old_leases(self, op: Operations) -> None:
        op.execute(
            "CREATE FUNCTION hookinbox_refuse_old_lease() RETURNS trigger LANGUAGE plpgsql AS $$"
            f" BEGIN RAISE EXCEPTION '{OLD_LEASE}'; END $$"
        )
        op.execute(
            "CREATE TRIGGER hookinbox_events_old_lease BEFORE UPDATE OF lease_token"
            " ON hookinbox_events FOR EACH ROW WHEN (NEW.lease_token IS NOT NULL)"
            " EXECUTE FUNCTION hookinbox_refuse_old_lease()"
        )
        op.execute(
            "CREATE TRIGGER hookinbox_outbox_old_lease BEFORE UPDATE OF status"
            " ON hookinbox_outbox FOR EACH ROW WHEN (NEW.status = 'delivering')"
            " EXECUTE FUNCTION hookinbox_refuse_old_lease()"
        )

    # -- Django's connections ---------------------------------------------------------------

    def borrowed_url(self, settings: Mapping[str, Any]) -> URL:
        options = {
            key: str(value)
            for key, value in (settings.get("OPTIONS") or {}).items()
            if key not in _DJANGO_OPTIONS
        }
        port = settings.get("PORT")
        return URL.create(
            f"postgresql+{DRIVER}",
            username=settings.get("USER") or None,
            password=settings.get("PASSWORD") or None,
            host=settings.get("HOST") or None,
            port=int(port) if port else None,
            database=settings.get("NAME") or None,
            query=options,
        )


def _unless_trigger_exists(op: Operations, trigger: str, statements: str) -> None:
    """Run `statements` unless `hookinbox_events` has `trigger`: creating or dropping a trigger
    locks the table against every write (and queues deliveries behind the writers it waits
    for), so a step run again (schema 9's copy, resumed) takes no such lock for nothing."""
    op.execute(
        "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_trigger"
        f" WHERE tgrelid = 'hookinbox_events'::regclass AND tgname = '{trigger}')"
        f" THEN {statements} END IF; END $$"
    )


# -- the engine -------------------------------------------------------------------------------


def _engine(url: URL, options: StoreOptions) -> Engine:
    engine = create_engine(
        url, **_engine_arguments(options), connect_args=_connect_args(url, options)
    )
    _watch(engine, _check_psycopg)
    return engine


def _async_engine(url: URL, options: StoreOptions) -> AsyncEngine:
    """The async worker's engine: asyncpg, or psycopg's async mode, with the same checks."""
    from sqlalchemy.ext.asyncio import create_async_engine

    if url.get_driver_name() == "asyncpg":
        # asyncpg takes no `options` argument (SQLAlchemy passes the URL's query to its
        # connect() as keywords): its `-c` settings go as asyncpg's `server_settings`.
        arguments, check = _asyncpg_connect_args(url, options), _checking_asyncpg(options)
        url = url.difference_update_query(["options"])
    else:  # psycopg_async takes libpq's parameters, as psycopg does
        arguments, check = _connect_args(url, options), _check_psycopg
    # Last in, first out: the connection an attempt just gave back serves the next one, so a
    # busy worker's connections never rest long enough to be pinged (`_ping_after_idle`).
    arguments_of_pool = {
        **_engine_arguments(options),
        "pool_pre_ping": False,
        "pool_use_lifo": True,
    }
    engine = create_async_engine(url, **arguments_of_pool, connect_args=arguments)
    _watch(engine.sync_engine, check, marks_failed_statements=check is not _check_psycopg)
    _ping_after_idle(engine.sync_engine)
    return engine


PING_AFTER_IDLE = 1.0
"""Seconds a pooled connection may rest before its next checkout pings the server."""
_CHECKED_IN = "hookinbox_checked_in"


def _ping_after_idle(engine: Engine) -> None:
    """The async engine's pre-ping, only for a connection that rested in the pool.

    SQLAlchemy's `pool_pre_ping` pings at every checkout, and its asyncpg ping is three round
    trips (BEGIN, `;`, ROLLBACK): on a busy async worker, which checks a connection out for
    every attempt, that was three round trips per event on top of the attempt's own four. A
    connection back in use within `PING_AFTER_IDLE` seconds was alive then; one that rested
    longer (a restart's dead connections rest in the pool) is pinged with one statement, and
    a failed ping gives the pool a new connection, as `pool_pre_ping` does. A server lost
    within that second fails the attempt's first statement instead: the event stays due."""

    @event.listens_for(engine, "checkin")
    def _rested_from(_dbapi_connection: Any, record: Any) -> None:
        record.info[_CHECKED_IN] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _ping_if_rested(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        rested = record.info.get(_CHECKED_IN)
        if rested is None or time.monotonic() - rested < PING_AFTER_IDLE:
            return
        try:
            cursor = dbapi_connection.cursor()
            cursor.execute("SELECT 1")
            cursor.close()
        except Exception as error:  # any failure: this connection is not to be used
            raise sa.exc.DisconnectionError(f"ping failed: {error}") from error


def _engine_arguments(options: StoreOptions) -> dict[str, Any]:
    return {
        "hide_parameters": HIDE_PARAMETERS,
        "pool_size": options.pool_size,
        "max_overflow": options.max_overflow,
        "pool_timeout": options.pool_timeout,
        "pool_pre_ping": True,  # a restarted server leaves dead connections in the pool
    }


def _watch(
    engine: Engine, check: Callable[[Any], None], *, marks_failed_statements: bool = False
) -> None:
    """Errors classified, and each new connection checked by `check` (its DB-API connection:
    psycopg's, or SQLAlchemy's adapter over an async driver's). With
    `marks_failed_statements` (asyncpg), a statement the server refused marks its connection
    for `refuse_aborted` until the next BEGIN or rollback to a savepoint."""

    @event.listens_for(engine, "handle_error")
    def _classify(context: ExceptionContext) -> None:
        original = context.original_exception
        sqlstate = getattr(original, "sqlstate", None)
        if sqlstate == READ_ONLY_SQL_TRANSACTION:
            # A write refused because the server is read-only: the session reached a standby
            # (a demoted primary that came back as one, or a URL without
            # target_session_attrs). Counted as a lost connection, the pool is dropped, new
            # sessions look for the primary, and the caller sees "unavailable" (503, retried)
            # rather than a bug (500).
            context.is_disconnect = True
        elif sqlstate == DEADLOCK_DETECTED and original is not None:
            # This session found the cycle and PostgreSQL aborted its transaction, nothing of
            # it kept: a transaction of hookinbox's own may run again (`retry_deadlocks`).
            mark_deadlock(original)
        elif sqlstate == UNIQUE_VIOLATION and original is not None:
            _name_unique_violation(original)
        connection = context.connection
        if marks_failed_statements and sqlstate is not None and connection is not None:
            # An error from the server aborts the transaction, or the savepoint it ran in,
            # until that ends: the innermost one is remembered for `refuse_aborted` on
            # asyncpg, which asks whether it is still active. (Not `begin` and
            # `rollback_savepoint` listeners clearing a flag: a connection event makes
            # SQLAlchemy dispatch events around every statement of the engine, which cost a
            # worker 15 % more CPU per event.)
            current = connection.get_nested_transaction() or connection.get_transaction()
            with contextlib.suppress(Exception):
                mark = weakref.ref(current) if current is not None else None
                connection.connection.info[_FAILED_STATEMENT] = mark

    @event.listens_for(engine, "do_connect")
    def _connect(dialect: Any, _record: Any, cargs: Any, cparams: Any) -> Any:
        try:
            connection = dialect.connect(*cargs, **cparams)
        except (OSError, TimeoutError) as error:
            # asyncpg lets a refused, unreachable or timed-out connect escape as the socket's
            # own error, which SQLAlchemy passes on unwrapped; as the driver's OperationalError
            # it is "unavailable" (503, a retry), as psycopg's is, not a bug.
            message = f"could not connect: {type(error).__name__}: {error}"
            raise dialect.loaded_dbapi.OperationalError(message) from error
        try:
            check(connection)
        except ConfigurationError:
            connection.close()
            raise
        return connection


def _name_unique_violation(original: BaseException) -> None:
    """asyncpg's violation, named for `unique_violation` as psycopg's `diag` names its own:
    SQLAlchemy's adapter raises it from asyncpg's error, which holds the names."""
    if getattr(original, "diag", None) is not None:
        return  # psycopg's: read from `diag` where it is caught
    cause = original.__cause__
    table = getattr(cause, "table_name", None)
    if cause is None or table is None:
        return
    columns = key_columns(getattr(cause, "detail", None))
    name_unique_violation(original, table, columns, getattr(cause, "constraint_name", None))


def _check_psycopg(connection: Any) -> None:
    # psycopg's connection, or (async) SQLAlchemy's adapter holding it as `_connection`.
    pgconn = getattr(connection, "pgconn", None) or connection._connection.pgconn
    check_encoding(pgconn)


def _checking_asyncpg(options: StoreOptions) -> Callable[[Any], None]:
    def check(adapted: Any) -> None:
        connection = adapted._connection  # asyncpg's own, behind SQLAlchemy's adapter
        encoding = str(connection.get_settings().server_encoding)
        if encoding.upper() != REQUIRED_ENCODING:
            database = connection._params.database or ""
            raise ConfigurationError(_encoding_refused(database, encoding))
        tune_socket(connection, options.tcp_timeout)

    return check


def tune_socket(connection: Any, timeout: float) -> None:
    """libpq's TCP settings (`tcp_settings`) on an asyncpg connection's socket, which asyncpg
    has no parameters for: a silent server is given up in `timeout` seconds, as with psycopg."""
    transport = getattr(connection, "_transport", None)
    sock = transport.get_extra_info("socket") if transport is not None else None
    if sock is None or timeout <= 0 or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return  # a UNIX socket has no TCP to tune
    settings = tcp_settings(timeout)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, settings["keepalives_idle"])
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, settings["keepalives_interval"])
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, settings["keepalives_count"])
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, settings["tcp_user_timeout"])


_WORD = re.compile(r"(?:\\.|[^\s\\])+")
"""A word of libpq's `options`: a backslash keeps the next character (a space) in it."""
_ESCAPE = re.compile(r"\\(.)")


def _asyncpg_connect_args(url: URL, options: StoreOptions) -> dict[str, Any]:
    """asyncpg's names for what `_connect_args` sets through libpq, and the settings of the
    URL's libpq `options` (`?options=-csearch_path%3Dapp`: the test kit's scratch schema, or
    an application's own), which asyncpg takes as `server_settings`. As with libpq, a setting
    hookinbox passes on its own (`application_name`) wins over the same one in `options`."""
    given = url.query.get("options")
    settings = _server_settings(" ".join(given) if isinstance(given, tuple) else given or "")
    defaults: dict[str, Any] = {
        "timeout": options.connect_timeout,
        "server_settings": {**settings, "application_name": "hookinbox"},
    }
    return {key: value for key, value in defaults.items() if key not in url.query}


def _server_settings(options: str) -> dict[str, str]:
    """libpq's `options` (`-c name=value` and `--name=value` switches, separated by spaces
    unless escaped with a backslash) as the settings they name; any other server switch is
    refused in one line, since asyncpg can only send settings."""
    words = [_ESCAPE.sub(r"\1", word) for word in _WORD.findall(options)]
    settings: dict[str, str] = {}
    switches = iter(words)
    for switch in switches:
        if switch == "-c":  # `-c name=value`, the setting in the next word
            switch += next(switches, "")
        name, equals, value = switch[2:].partition("=")
        if switch[:2] not in ("-c", "--") or not name or not equals:
            raise ConfigurationError(
                f"a postgresql+asyncpg URL's options take only -c name=value settings "
                f"(asyncpg sends settings, not server switches): {options!r}"
            )
        settings[name.replace("-", "_")] = value
    return settings


def check_encoding(pgconn: Any) -> None:
    """Refuse a database that is not UTF8, before anything reads a string from it.

    A cluster initialised under the C locale makes SQL_ASCII databases: the server neither
    converts nor checks text there, and psycopg returns bytes where SQLAlchemy expects str
    (its first query, the server version, fails with a TypeError). One line naming the
    encoding needed is the answer; the same holds for the other single-byte encodings, where
    a header or an error message outside their alphabet would fail to store.
    """
    raw = pgconn.parameter_status(b"server_encoding") or b""
    encoding = raw.decode("ascii", "replace")
    if encoding.upper() != REQUIRED_ENCODING:
        database = (pgconn.db or b"").decode("utf-8", "replace")
        raise ConfigurationError(_encoding_refused(database, encoding))


def _encoding_refused(database: str, encoding: str) -> str:
    return (
        f"database {database!r} is encoded {encoding}; hookinbox needs {REQUIRED_ENCODING}"
        f" (CREATE DATABASE ... ENCODING 'UTF8' TEMPLATE template0, or initdb -E UTF8)"
    )


def _connect_args(url: URL, options: StoreOptions) -> dict[str, Any]:
    """libpq parameters hookinbox sets unless the URL's query sets them itself."""
    defaults: dict[str, Any] = {
        "connect_timeout": max(1, round(options.connect_timeout)),
        "application_name": "hookinbox",
        **tcp_settings(options.tcp_timeout),
    }
    return {key: value for key, value in defaults.items() if key not in url.query}


def tcp_settings(timeout: float) -> dict[str, int]:
    """libpq's TCP settings for a connection given up after `timeout` seconds of silence.

    `tcp_user_timeout` bounds data sent and not acknowledged (a query, a COMMIT); keepalives
    find a silent server under a connection that sends nothing (idle in the pool, or the
    listener waiting for notifications). Linux ends the probing at `tcp_user_timeout` too.
    """
    if timeout <= 0:
        return {}
    idle = max(1, round(timeout / 2))
    return {
        "tcp_user_timeout": max(1, round(timeout * 1000)),  # milliseconds
        "keepalives": 1,
        "keepalives_idle": idle,
        "keepalives_interval": max(1, round((timeout - idle) / KEEPALIVE_PROBES)),
        "keepalives_count": KEEPALIVE_PROBES,
    }


def _several_hosts(url: URL) -> bool:
    hosts = url.query.get("host", url.host or "")
    return isinstance(hosts, tuple) or "," in hosts


# -- the upsert -------------------------------------------------------------------------------


class PostgresUpsert(postgresql.Insert, Upsert):
    """PostgreSQL's own `ON CONFLICT`, as the seam's `Upsert`."""

    inherit_cache = True


# -- group commit's statement -------------------------------------------------------------------

# The batch travels as two parameters: the events and the delivery-log rows as one JSON text,
# and every body in one bytea (each event names its slice). One array parameter per column was
# the first form: psycopg builds an array literal in Python, escaping each element, which cost
# about 20 us of the writer's CPU per row, a third of a saturated server's writer thread
# (a body, headers' JSON and timestamps escaped character by character); a JSON text is
# written by the C encoder and read once by PostgreSQL, a bytea is copied as it stands.
_BATCH = f"""
WITH batch AS (
    SELECT b.s AS source, b.i AS event_id, b.t AS event_type, b.o AS occurred_at,
           b.r AS received_at, substring(%(bodies)s::bytea FROM b.bo FOR b.bn) AS body,
           b.h AS headers, b.d AS body_sha256, b.st AS status, b.c AS delivery_count,
           b.l AS last_delivery_at, b.e AS last_error
    FROM json_to_recordset(%(events)s::json -> 0) AS b(
        s varchar, i varchar, t varchar, o timestamptz, r timestamptz, bo int, bn int,
        h text, d varchar, st varchar, c int, l timestamptz, e text)
), upserted AS (
    INSERT INTO hookinbox_events ({EVENT_COLUMNS})
    SELECT source, event_id, event_type, occurred_at, received_at, body, headers, body_sha256,
           status, 0, 0, received_at, delivery_count, 0, last_delivery_at, last_error
    FROM batch
    {ON_CONFLICT.format(latest="GREATEST")}
), logged AS (
    INSERT INTO hookinbox_deliveries (source, event_id, received_at, duplicate, key_conflict)
    SELECT u.source, u.event_id, l.r,
           NOT (l.p = 1 AND u.delivery_count = l.f AND u.received_via = 'webhook'),
           u.body_sha256 <> l.d AND u.received_via = 'webhook'
    FROM json_to_recordset(%(events)s::json -> 1)
         AS l(s varchar, i varchar, r timestamptz, p int, f int, d varchar)
    JOIN upserted u ON u.source = l.s AND u.event_id = l.i
)
SELECT id, source, event_id, delivery_count, body_sha256, status, received_via FROM upserted
"""


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


# -- what jsonb cannot read (payload search's careful form) ------------------------------------

_NUL_BYTE = b"\x00"
"""In no UTF-8 JSON text; in every UTF-16 or UTF-32 one ({ is ASCII)."""
_SUSPECT_ESCAPE = r"\\u(0000|[dD][89a-fA-F])"
_ESCAPES_READ = r"\\\\|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"
"""An escaped backslash, or a surrogate pair: removed before looking for a lone escape."""
_SUSPECT_TOKEN = r"NaN|Infinity|[0-9][eE][-+]?[0-9]{6}"
_STRINGS = r'"([^"\\]|\\.)*"'
"""Every string literal: removed before looking for a token outside strings."""


# -- the pruner's view of the others ------------------------------------------------------------

_NOW = sa.text("SELECT clock_timestamp()")
_OTHERS = sa.text(
    "SELECT count(*) FILTER (WHERE state = 'active' OR state_change > :since),"
    "       count(*) FILTER (WHERE wait_event_type IN ('Lock', 'LWLock', 'IO'))"
    "  FROM pg_stat_activity"
    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
    "   AND backend_type = 'client backend'"
)


# -- a connection Django opened -----------------------------------------------------------------


class BorrowedPostgresDialect(OwnsNoTransactions, PGDialect_psycopg):
    """SQLAlchemy's psycopg dialect on a connection whose transactions another framework runs."""

    supports_statement_cache = True


registry.register(f"postgresql.{DRIVER}", __name__, "BorrowedPostgresDialect")


SCRATCH_DROP_WAIT = "10s"
"""How long dropping a scratch schema waits for the locks on its tables before it ends the
sessions that hold them."""


def _drop_scratch_schema(admin: sa.Engine, schema: str) -> None:
    """Drop a scratch schema, even when a session still holds locks on its tables (a test's
    worker that never returned, its transaction open): after `SCRATCH_DROP_WAIT`, the sessions
    holding locks in the schema are ended and the drop runs again. Only a throwaway schema is
    dropped this way; the sessions ended are the ones using it."""
    drop = sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    holders = sa.text(
        "SELECT pg_terminate_backend(l.pid) FROM pg_locks l"
        " JOIN pg_class c ON c.oid = l.relation"
        " JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = :schema AND l.pid <> pg_backend_pid()"
        " GROUP BY l.pid"
    )
    with admin.connect() as connection:
        connection.exec_driver_sql(f"SET lock_timeout = '{SCRATCH_DROP_WAIT}'")
        try:
            connection.execute(drop)
            return
        except sa.exc.OperationalError as error:
            if getattr(error.orig, "sqlstate", None) != "55P03":  # lock_not_available
                raise
        connection.execute(holders, {"schema": schema})
        connection.exec_driver_sql("SET lock_timeout = 0")
        connection.execute(drop)
