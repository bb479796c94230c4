"""SQLite's engines and sessions: the URL, the pragmas of every connection, `BEGIN IMMEDIATE`
taken by polling, read-only connections dropped, and the transactions' own rules."""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import sqlalchemy as sa
from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import URL, ExceptionContext

from hookinbox._errors import ConfigurationError
from hookinbox._storage._awaiting import sleep_in_event_loop
from hookinbox._storage._dialects._base import Dialect
from hookinbox._storage._dialects._borrowed import DRIVER
from hookinbox._storage._dialects._sqlite._errors import is_read_only_error
from hookinbox._storage._errors import translate_errors
from hookinbox._storage._options import HIDE_PARAMETERS, READ_ONLY, StoreOptions

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

    from hookinbox._storage._transactions import Transactions

LOCK_POLL = 0.001
"""Seconds between two tries for SQLite's write lock held by another process."""
SQLITE_BUSY = 5


class SQLiteEngines(Dialect):
    """The part of the dialect that answers for engines, URLs and transactions."""

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


# -- the engine -------------------------------------------------------------------------------


class HintedCompiler(sqlite.base.SQLiteCompiler):
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
    engine.dialect.statement_compiler = HintedCompiler
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
        if is_read_only_error(context.original_exception):
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
