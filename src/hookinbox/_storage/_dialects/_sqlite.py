"""SQLite: one durable file shared by processes, one writer at a time.

The engine sets WAL and `synchronous` on every connection and begins every writing transaction
with `BEGIN IMMEDIATE`, taken by polling (below) rather than SQLite's busy handler; readers
begin deferred and never queue for the write lock. Group commit's batch is a multi-row
`VALUES` upsert in the caller's transaction (in process: no round trips to save). Payload
search asks `json_valid`, then walks the path with `json_each` (a repeated key's last value).
The pruner's transactions skip the fsync of their commits, and space freed by a prune goes
back to the file system in short writes.
"""

from __future__ import annotations

import contextlib
import functools
import re
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import quote

import sqlalchemy as sa
from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.dialects import registry, sqlite
from sqlalchemy.dialects.sqlite import DATETIME
from sqlalchemy.dialects.sqlite.pysqlite import SQLiteDialect_pysqlite
from sqlalchemy.engine import URL, ExceptionContext
from sqlalchemy.engine.interfaces import Dialect as SQLAlchemyDialect
from sqlalchemy.types import DateTime

from hookinbox._errors import ConfigurationError
from hookinbox._records import Pressure, UniqueViolation
from hookinbox._storage._awaiting import sleep_in_event_loop
from hookinbox._storage._batch import (
    EVENT_COLUMNS,
    ON_CONFLICT,
    Group,
    Row,
    log_rows,
    upsert_parameters,
)
from hookinbox._storage._dialects._base import Dialect, Upsert
from hookinbox._storage._dialects._borrowed import DRIVER, OwnsNoTransactions
from hookinbox._storage._errors import (
    NOT_MINE,
    ErrorReader,
    NotMine,
    ReadsNothing,
    translate_errors,
)
from hookinbox._storage._options import HIDE_PARAMETERS, READ_ONLY, StoreOptions
from hookinbox._storage._schema import events

if TYPE_CHECKING:
    from alembic.operations import Operations
    from sqlalchemy.ext.asyncio import AsyncEngine

    from hookinbox._model import NewDelivery
    from hookinbox._records import PayloadMatch
    from hookinbox._storage._transactions import Transactions

OLD_LEASE = "hookinbox schema 9: a process of an older hookinbox tried to lease; upgrade it"
LOCK_POLL = 0.001
"""Seconds between two tries for SQLite's write lock held by another process."""
SQLITE_BUSY = 5
SQLITE_READONLY = 8
"""The primary result code of "attempt to write a readonly database" and its extended codes."""
SQLITE_CORRUPT = 11
SQLITE_NOTADB = 26
_UNIQUE_MESSAGE = re.compile(r"UNIQUE constraint failed: (?P<targets>.+)$")


class SQLiteErrors(ReadsNothing):
    """What sqlite3's errors mean (aiosqlite raises sqlite3's classes)."""

    def unique_violation(self, original: BaseException) -> UniqueViolation | NotMine | None:
        """The table and columns sqlite3's message names (it names no constraint)."""
        if not isinstance(original, sqlite3.Error):
            return NOT_MINE
        match = _UNIQUE_MESSAGE.search(str(original))
        if not match:
            return None
        targets = [t.strip() for t in match["targets"].split(",")]
        tables = {t.rpartition(".")[0] for t in targets}
        columns = frozenset(t.rpartition(".")[2] for t in targets)
        return UniqueViolation(tables.pop() if len(tables) == 1 else None, columns, None)

    def unavailable(self, original: BaseException) -> bool:
        """A file that is damaged or is not a database at all: sqlite3 raises a plain
        DatabaseError for it, yet nothing can be stored or read until an operator restores
        it."""
        code = getattr(original, "sqlite_errorcode", None)
        return code is not None and code & 0xFF in (SQLITE_CORRUPT, SQLITE_NOTADB)

    def detail(self, original: BaseException) -> str | None:
        """The extended result code (SQLITE_IOERR_WRITE, SQLITE_FULL, SQLITE_READONLY, ...):
        a write refused by a read-only or immutable file reads "disk I/O error" alone."""
        name = getattr(original, "sqlite_errorname", None)
        return str(name) if name else None


class SQLite(Dialect):
    name: ClassVar[str] = "sqlite"
    single_writer: ClassVar[bool] = True
    listens: ClassVar[bool] = False
    returns_joined_rows: ClassVar[bool] = False
    autocommit_batches: ClassVar[bool] = False
    # Every delivery waits for SQLite's one write lock while a prune batch holds it.
    prune_busy_batch_seconds: ClassVar[float] = 0.005
    django_vendors: ClassVar[tuple[str, ...]] = ("sqlite",)
    async_drivers: ClassVar[Mapping[str, str]] = {"aiosqlite": "aiosqlite"}
    errors: ClassVar[ErrorReader] = SQLiteErrors()

    # -- engines and URLs -------------------------------------------------------------------

    def normalize_url(self, url: URL) -> URL:
        if url.get_driver_name() not in ("pysqlite", "", DRIVER, *self.async_drivers):
            raise ConfigurationError(
                "hookinbox uses the standard sqlite3 driver (sqlite:///), or aiosqlite for "
                "its async worker (sqlite+aiosqlite:///)"
            )
        if not url.database or url.database == ":memory:":
            raise ConfigurationError(
                "SQLite needs a file (sqlite:///path.db): an in-memory database is lost on exit"
            )
        return url if url.get_driver_name() == DRIVER else url.set(drivername="sqlite")

    def build_engine(self, url: URL, options: StoreOptions) -> Engine:
        return _engine(url, options)

    def build_async_engine(self, url: URL, options: StoreOptions) -> AsyncEngine:
        return _async_engine(url, options)

    def missing_database(self, url: URL) -> str | None:
        if url.database and not Path(url.database).exists():
            return f"no database at {url.database} (run `hookinbox migrate` first)"
        return None

    def read_only_engine(self, url: URL) -> Engine:
        # Opened read-only rather than through `build_engine`, which switches every file it
        # opens to WAL: a persistent change not to be made to a user's database by a check.
        path = Path(str(url.database)).resolve()
        if not path.exists():
            # sqlite3 would create an empty file and we would "verify" nothing in it.
            raise ConfigurationError(f"no SQLite database at {url.database}")
        read_only = sa.URL.create(
            "sqlite", database=f"file:{quote(str(path))}", query={"mode": "ro", "uri": "true"}
        )
        return sa.create_engine(read_only, poolclass=sa.NullPool)

    def listen_params(self, engine: Engine, options: StoreOptions) -> dict[str, Any]:
        raise ConfigurationError("SQLite has no LISTEN: its workers poll, or are sent datagrams")

    @contextlib.contextmanager
    def scratch_database(self, url: URL) -> Iterator[str]:
        # A SQLite URL names its own file, which the caller chose: used as it stands.
        yield url.render_as_string(hide_password=False)

    # -- transactions -----------------------------------------------------------------------

    @contextlib.contextmanager
    def housekeeping(self, store: Transactions) -> Iterator[Connection]:
        """Its commit does not fsync the WAL (`synchronous=NORMAL` for that one transaction;
        the next durable commit's fsync carries its pages too), so a prune's batches add no
        fsyncs of their own to the ones deliveries wait for. WAL mode keeps the file
        consistent either way."""
        store.ensure_schema()
        with store.writing(), translate_errors(), store.engine.connect() as connection:
            driver: Any = connection.connection.driver_connection
            driver.execute("PRAGMA synchronous=NORMAL")  # outside any transaction
            try:
                with connection.begin():
                    yield connection
            finally:
                if driver.in_transaction:  # a commit that failed part way: undone here
                    driver.rollback()
                driver.execute(f"PRAGMA synchronous={store.options.sqlite_synchronous}")

    def refuse_aborted(self, connection: Connection) -> None:
        """Nothing to refuse: SQLite keeps a transaction usable after a failed statement."""

    def check_writable(self, connection: Connection) -> None:
        """A file that cannot be written fails the probe's write itself (`Store.ping`)."""

    def limit_statements(
        self, connection: Connection, seconds: float, *, local: bool = False
    ) -> None:
        """One writer at a time: a write waits for the lock (`busy_timeout`), never a row."""

    def lock_for_migration(self, connection: Connection) -> None:
        """`BEGIN IMMEDIATE` (every writing transaction's) admits one migration at a time."""

    def limit_lock_waits(self, connection: Connection, seconds: float) -> None:
        """Nothing to bound: a transaction holds the one write lock from its `BEGIN IMMEDIATE`
        (a wait of `busy_timeout` at most), before any statement in it."""

    def lock_for_copy(self, connection: Connection) -> None:
        """`BEGIN IMMEDIATE` again: one writer at a time, a copy's batch among them."""

    # -- statements -------------------------------------------------------------------------

    def insert(self, table: sa.TableClause) -> Upsert:
        return SQLiteUpsert(table)

    def read_through(self, query: sa.Select[Any], table: sa.Table, index: str) -> sa.Select[Any]:
        # Without statistics (no ANALYZE: a new database, or any that was never analysed)
        # SQLite reads the event queue's open rows by state and sorts the whole backlog for
        # each lease (3.6 ms a lease behind 6,000 events, against 0.2 through the due index:
        # bench/README.md). `INDEXED BY` names the index; `_HintedCompiler` writes it.
        return query.with_hint(table, f"INDEXED BY {index}", dialect_name="sqlite")

    def write_batch(
        self, connection: Connection, deliveries: Sequence[NewDelivery], groups: list[Group]
    ) -> dict[tuple[str, str], Row]:
        if len(groups) > _MAX_ROWS:
            rows: dict[tuple[str, str], Row] = {}
            for start in range(0, len(groups), _MAX_ROWS):
                rows.update(
                    self.write_batch(connection, deliveries, groups[start : start + _MAX_ROWS])
                )
            return rows
        parameters = upsert_parameters(groups, sqlite_time)
        result = connection.exec_driver_sql(_upsert(len(groups)), tuple(parameters))
        rows = {(r[1], r[2]): (r[0], r[3], r[4], r[5], r[6] == "webhook") for r in result}
        connection.exec_driver_sql(_LOG, log_rows(deliveries, groups, rows, sqlite_time))
        return rows

    def payload_value(self, match: PayloadMatch, *, careful: bool = False) -> sa.ColumnElement[Any]:
        """The path walked one key at a time with `json_each`, taking the LAST member of a
        key an object repeats, as Python's parser (and so every handler) and PostgreSQL's
        jsonb read `{"a": 1, "a": 2}`: `json_extract` would read the first. `json_valid`
        first: a body SQLite cannot read is never walked (careful or not). Booleans read
        true/false as PostgreSQL's #>> does, other scalars their text, an object or an array
        NULL. Over 5,000 bodies of 1.1 KB a page took 0.07 s against `json_extract`'s 0.014 s
        (one run, docs/dashboard.md)."""
        text = sa.cast(events.c.body, sa.Text)
        document: sa.ColumnElement[Any] = text
        for depth, segment in enumerate(match.path):
            member = sa.func.json_each(document).table_valued("key", "value", "type", "id")
            key = sa.bindparam(
                f"payload_key_{depth}",
                int(segment) if segment.isdigit() else segment,  # an array's keys are numbers
                type_=sa.Integer if segment.isdigit() else sa.Text,
            )
            last = member.c.key == key
            if depth < len(match.path) - 1:
                # Only an object or an array is walked into (json_each reads NULL as
                # nothing, and refuses a scalar's text).
                picked: sa.ColumnElement[Any] = sa.case(
                    (member.c.type.in_(["object", "array"]), member.c.value), else_=None
                )
            else:
                picked = sa.case(
                    (member.c.type.in_(["true", "false"]), member.c.type),
                    (member.c.type.in_(["object", "array", "null"]), None),
                    else_=sa.cast(member.c.value, sa.Text),
                )
            document = (
                sa.select(picked)
                .select_from(member)
                .where(last)
                .order_by(member.c.id.desc())
                .limit(1)
                .scalar_subquery()
            )
        return sa.case((sa.func.json_valid(text) == 1, document), else_=None)

    def time_bucket(
        self, column: sa.ColumnElement[Any], start: datetime, width: timedelta
    ) -> sa.ColumnElement[Any]:
        from hookinbox._storage._types import UTCDateTime

        # SQLite keeps naive UTC text; julianday() reads it (and the bound start) as days.
        days = sa.func.julianday(column) - sa.func.julianday(sa.literal(start, UTCDateTime()))
        return sa.cast(days * 86400.0 / width.total_seconds(), sa.Integer)

    def check_row_size(self, connection: Connection, delivery: NewDelivery) -> None:
        """A row is bound as parameters, in process: no packet to fit."""

    def check_body_limit(self, store: Transactions, max_body_size: int) -> None:
        """Nothing asked: a body is bound as a parameter, in process (SQLite's own bound
        on a value, 1 GB unless compiled otherwise, is not checked here)."""

    def notify(self, connection: Connection, channel: str) -> None:
        """No LISTEN: SQLite workers poll (or `serve`'s datagram wakes its own worker)."""

    # -- the database's own state -----------------------------------------------------------

    def now(self, connection: Connection) -> datetime:
        """A file on this host: every process that opens it shares this host's clock."""
        return datetime.now(UTC)

    def pressure_mark(self, connection: Connection) -> object:
        # Changes whenever another connection, of this process or another, has committed.
        return connection.exec_driver_sql("PRAGMA data_version").scalar_one()

    def pressure_since(self, connection: Connection, mark: object) -> Pressure:
        version = connection.exec_driver_sql("PRAGMA data_version").scalar_one()
        return Pressure(int(version != mark), 0)

    def checkpoint_passive(self, store: Transactions) -> None:
        with translate_errors():
            raw = store.engine.raw_connection()
            try:  # outside any transaction: a checkpoint cannot run inside one
                driver: Any = raw.driver_connection
                driver.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            finally:
                raw.close()

    def free_pages(self, store: Transactions) -> int:
        with translate_errors(), store.engine.connect() as connection:
            return int(connection.exec_driver_sql("PRAGMA freelist_count").scalar_one())

    def give_back_pages(self, store: Transactions, pages: int) -> int:
        with store.writing(), translate_errors():
            raw = store.engine.raw_connection()
            try:
                driver: Any = raw.driver_connection
                if driver.execute("PRAGMA auto_vacuum").fetchone()[0] != 2:  # 2: INCREMENTAL
                    return 0
                before = driver.execute("PRAGMA freelist_count").fetchone()[0]
                # As a script: sqlite3's execute() would step the pragma once, one page.
                script = f"BEGIN IMMEDIATE; PRAGMA incremental_vacuum({int(pages)}); COMMIT;"
                driver.executescript(script)
                after = driver.execute("PRAGMA freelist_count").fetchone()[0]
            finally:
                raw.close()
        return int(before) - int(after)

    # -- migrations -------------------------------------------------------------------------

    def create_notify_trigger(
        self, op: Operations, table: str, channel: str, function: str
    ) -> None:
        """No LISTEN, nothing to notify."""

    def lock_tables(self, op: Operations, *tables: str) -> None:
        """The migration's BEGIN IMMEDIATE holds the one write lock already."""

    def set_fill_factor(self, op: Operations, table: str, percent: int) -> None:
        """SQLite has no fill factor (and rewrites a row in place when it can)."""

    def queue_new_events(self, op: Operations) -> None:
        op.execute(
            "CREATE TRIGGER IF NOT EXISTS hookinbox_events_queue AFTER INSERT ON hookinbox_events"
            " WHEN NEW.status NOT IN ('processed', 'unhandled') BEGIN"
            " INSERT INTO hookinbox_event_queue"
            " (id, state, next_attempt_at, received_at, attempts)"
            " VALUES (NEW.id, NEW.status, NEW.next_attempt_at, NEW.received_at, NEW.attempts);"
            " END"
        )

    def mirror_queue_changes(self, op: Operations) -> None:
        # `done` is `_queue_copy.TOMBSTONE`. One writer at a time: a copy's batch always reads
        # the events as they are, but the tombstones keep the three databases' copies alike.
        changed = (
            "AFTER UPDATE OF status, next_attempt_at, attempts, received_at ON hookinbox_events"
        )
        tombstone = (
            " INSERT INTO hookinbox_event_queue"
            " (id, state, next_attempt_at, received_at, attempts)"
            " VALUES (OLD.id, 'done', OLD.next_attempt_at, OLD.received_at, OLD.attempts)"
            " ON CONFLICT (id) DO UPDATE SET state = 'done'; END"
        )
        op.execute(
            f"CREATE TRIGGER IF NOT EXISTS hookinbox_events_mirror_open {changed}"
            f" WHEN NEW.status NOT IN ({_CLOSED}) BEGIN"
            " INSERT INTO hookinbox_event_queue"
            " (id, state, next_attempt_at, received_at, attempts)"
            " VALUES (NEW.id,"
            " CASE WHEN NEW.status = 'processing' THEN 'pending' ELSE NEW.status END,"
            " NEW.next_attempt_at, NEW.received_at, NEW.attempts)"
            " ON CONFLICT (id) DO UPDATE SET state = excluded.state,"
            " next_attempt_at = excluded.next_attempt_at, received_at = excluded.received_at,"
            " attempts = excluded.attempts; END"
        )
        op.execute(
            f"CREATE TRIGGER IF NOT EXISTS hookinbox_events_mirror_closed {changed}"
            f" WHEN NEW.status IN ({_CLOSED}) AND OLD.status NOT IN ({_CLOSED}) BEGIN{tombstone}"
        )
        op.execute(
            "CREATE TRIGGER IF NOT EXISTS hookinbox_events_mirror_deleted"
            f" AFTER DELETE ON hookinbox_events WHEN OLD.status NOT IN ({_CLOSED}) BEGIN{tombstone}"
        )

    def stop_mirroring_queue(self, op: Operations) -> None:
        for change in ("open", "closed", "deleted"):
            op.execute(f"DROP TRIGGER IF EXISTS hookinbox_events_mirror_{change}")

    def refuse_old_leases(self, op: Operations) -> None:
        for name, table, column, when in (
            ("hookinbox_events_old_lease", "hookinbox_events", "lease_token",
             "NEW.lease_token IS NOT NULL"),
            ("hookinbox_outbox_old_lease", "hookinbox_outbox", "status",
             "NEW.status = 'delivering'"),
        ):  # fmt: skip
            op.execute(
                f"CREATE TRIGGER IF NOT EXISTS {name} BEFORE UPDATE OF {column} ON {table}"
                f" WHEN {when}"
                f" BEGIN SELECT RAISE(ABORT, '{OLD_LEASE}'); END"
            )

    # -- Django's connections ---------------------------------------------------------------

    def borrowed_url(self, settings: Mapping[str, Any]) -> URL:
        return URL.create(f"sqlite+{DRIVER}", database=str(settings["NAME"]))


_CLOSED = "'processed', 'unhandled'"
"""The statuses of an event whose work is over (no queue row), in the triggers' SQL."""


# -- the engine -------------------------------------------------------------------------------


class _HintedCompiler(sqlite.base.SQLiteCompiler):
    """SQLAlchemy's SQLite compiler, writing a table's hint after its name (SQLAlchemy's
    drops them for SQLite): `INDEXED BY`, the one SQLite has (`SQLite.read_through`)."""

    def get_from_hint_text(self, table: Any, text: str | None) -> str | None:
        return text


def _engine(url: URL, options: StoreOptions) -> Engine:
    engine = create_engine(url, **_engine_arguments(options))
    _configure(engine, options, sleep=time.sleep)
    return engine


def _async_engine(url: URL, options: StoreOptions) -> AsyncEngine:
    """The same engine on aiosqlite (the async worker's): the same pragmas and `BEGIN
    IMMEDIATE`, whose polling for another process's write lock yields to the event loop."""
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(url, **_engine_arguments(options))
    _configure(engine.sync_engine, options, sleep=sleep_in_event_loop)
    return engine


def _engine_arguments(options: StoreOptions) -> dict[str, Any]:
    return {
        "hide_parameters": HIDE_PARAMETERS,
        "connect_args": {"timeout": options.busy_timeout, "check_same_thread": False},
        "pool_size": options.pool_size,
        "max_overflow": options.max_overflow,
        "pool_timeout": options.pool_timeout,
    }


def _configure(engine: Engine, options: StoreOptions, *, sleep: Callable[[float], None]) -> None:
    """Pragmas on connect, `BEGIN IMMEDIATE` by polling, read-only connections dropped; on a
    sync engine or an async engine's sync facade (whose DB-API connection is SQLAlchemy's
    adapter: its calls are awaited underneath)."""
    engine.dialect.statement_compiler = _HintedCompiler
    synchronous = options.sqlite_synchronous
    busy_ms = int(options.busy_timeout * 1000)

    @event.listens_for(engine, "connect")
    def _configure_connection(dbapi_connection: Any, _record: Any) -> None:
        # sqlite3's own transaction handling begins lazily and deferred; a deferred transaction
        # that reads then writes can fail with SQLITE_BUSY without waiting. We issue
        # BEGIN IMMEDIATE ourselves (below) so every transaction queues for the write lock.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout={busy_ms}")
        cursor.execute("PRAGMA page_count")
        if cursor.fetchone()[0] == 0:
            # A new, empty file: pages freed by the pruner can be given back to the file
            # system (incremental vacuum). Only a database created with it has it (setting it
            # later needs a full VACUUM). Never written to an existing file: it may be
            # read-only, or another connection may hold the write lock.
            cursor.execute("PRAGMA auto_vacuum=INCREMENTAL")
        _enable_wal(cursor, options.busy_timeout, sleep)  # readers never block the one writer
        cursor.execute(f"PRAGMA synchronous={synchronous}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(connection: Any) -> None:
        if connection.get_execution_options().get(READ_ONLY, False):
            connection.exec_driver_sql("BEGIN")
            return
        # The DB-API connection: sqlite3's own, or aiosqlite's behind SQLAlchemy's adapter.
        driver = connection.connection.dbapi_connection
        driver.execute("PRAGMA busy_timeout=0")  # this process polls instead (below)
        try:
            if not _poll_for_write_lock(driver, options.busy_timeout, sleep):
                # The last try: its error is SQLAlchemy's, as before (a 503, or a read-only
                # connection dropped from the pool).
                connection.exec_driver_sql("BEGIN IMMEDIATE")
        finally:
            with contextlib.suppress(sqlite3.Error):  # a connection just dropped is closed
                driver.execute(f"PRAGMA busy_timeout={busy_ms}")

    @event.listens_for(engine, "handle_error")
    def _discard_read_only(context: ExceptionContext) -> None:
        # A connection opened while the file could not be written (read-only, immutable) is
        # opened read-only by SQLite without a word, and stays so: pooled, it would refuse
        # every write for the life of the process, long after the file is writable again.
        # Counted as lost, it is dropped (with the rest of the pool) and the next one is
        # opened afresh.
        if _is_read_only_error(context.original_exception):
            context.is_disconnect = True


def _poll_for_write_lock(driver: Any, timeout: float, sleep: Callable[[float], None]) -> bool:
    """`BEGIN IMMEDIATE` on a connection without a busy timeout, tried every `LOCK_POLL` while
    another process holds the write lock, for up to `timeout` seconds; False if it is still
    held then, or on any other error (left to the caller's last try).

    SQLite's own busy handler sleeps 1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, then 100 ms
    between tries: a delivery that arrives while the pruner (another process) commits a 20 ms
    batch wakes 10-30 ms after the lock was freed, and a writer already sleeping 100 ms at a
    time misses every gap shorter than that between the other process's transactions: it
    waited 1.7-2.0 s behind transactions of 300 ms with 10 ms gaps, where it is taken in the
    first gap here (bench/README.md, growth). A try costs tens of microseconds; only a writer
    that waits makes them.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            driver.execute("BEGIN IMMEDIATE")
            return True
        except sqlite3.OperationalError as error:
            code = getattr(error, "sqlite_errorcode", None)
            if code is None or code & 0xFF != SQLITE_BUSY:
                return False
        if time.monotonic() >= deadline:
            return False
        sleep(LOCK_POLL)


def _is_read_only_error(error: BaseException) -> bool:
    code = getattr(error, "sqlite_errorcode", None)
    return isinstance(error, sqlite3.Error) and code is not None and code & 0xFF == SQLITE_READONLY


def _enable_wal(cursor: Any, timeout: float, sleep: Callable[[float], None]) -> None:
    """Switch a database to WAL (a persistent setting: once per file, not per connection).

    Changing the journal mode needs an exclusive lock and SQLite does not wait for it with the
    busy handler, so processes opening a new file at once retry here until one has switched.
    """
    deadline = time.monotonic() + timeout
    while True:
        cursor.execute("PRAGMA journal_mode")
        if cursor.fetchone()[0].lower() == "wal":
            return
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
        except sqlite3.OperationalError:
            if time.monotonic() >= deadline:
                raise
            sleep(0.01)


# -- the upsert -------------------------------------------------------------------------------


class SQLiteUpsert(sqlite.Insert, Upsert):
    """SQLite's own `ON CONFLICT`, as the seam's `Upsert`."""

    inherit_cache = True


# -- group commit's statements ------------------------------------------------------------------

_MAX_ROWS = 2_000
"""The most rows in one upsert (13 values each, within SQLite's 32,766 variables): a
group-commit batch passes `max_rows` by up to one batched delivery's events, and is then
written in two statements of the same transaction."""

_LOG = (
    "INSERT INTO hookinbox_deliveries (received_at, source, event_id, duplicate, key_conflict) "
    "VALUES (?, ?, ?, ?, ?)"
)


@functools.lru_cache(maxsize=64)
def _upsert(rows: int) -> str:
    """The upsert of `rows` events as a multi-row VALUES list (one text per row count)."""
    values = ", ".join(["(?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 0, ?, ?, 0, ?, ?)"] * rows)
    return f"INSERT INTO hookinbox_events ({EVENT_COLUMNS}) VALUES {values}" + ON_CONFLICT.format(
        latest="MAX"
    )


def sqlite_time(value: datetime | None) -> str | None:
    """The text SQLAlchemy's SQLite DateTime writes (naive UTC, a four-digit year, always with
    microseconds), so rows from a batch sort and compare with every other row. `isoformat`
    rather than `strftime`: a third of the SQLite writer's CPU went to `strftime`."""
    if value is None:
        return None
    if value.tzinfo is not UTC:
        value = value.astimezone(UTC)
    return value.isoformat(" ", "microseconds")[:26]  # less the "+00:00"


# -- a connection Django opened -----------------------------------------------------------------


class _ConvertedDateTime(DATETIME):
    """Django's SQLite connections parse DATETIME columns themselves (detect_types): pass
    the datetime they return through, parse text as SQLAlchemy would."""

    def result_processor(self, dialect: SQLAlchemyDialect, coltype: object) -> Any:
        parse = super().result_processor(dialect, coltype)

        def process(value: Any) -> Any:
            if value is None or isinstance(value, datetime) or parse is None:
                return value
            return parse(value)

        return process


class BorrowedSQLiteDialect(OwnsNoTransactions, SQLiteDialect_pysqlite):
    """SQLAlchemy's SQLite dialect on a connection whose transactions another framework runs."""

    supports_statement_cache = True  # SQLAlchemy reads it from each dialect class itself
    colspecs = {**SQLiteDialect_pysqlite.colspecs, DateTime: _ConvertedDateTime}  # noqa: RUF012
    statement_compiler = _HintedCompiler


registry.register(f"sqlite.{DRIVER}", __name__, "BorrowedSQLiteDialect")
