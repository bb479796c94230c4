"""Engines tuned per dialect: durable SQLite shared by processes, pooled PostgreSQL."""

from __future__ import annotations

import contextlib
import re
import sqlite3
import time
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, ExceptionContext, make_url
from sqlalchemy.exc import ArgumentError

from hookinbox._errors import ConfigurationError
from hookinbox._extras import require

HIDE_PARAMETERS = True
"""SQLAlchemy's errors quote a failed statement's parameters, and the inbox's statements carry
raw bodies and signature headers (a handler's carry its event's data): an error logged, stored
as `last_error` or shown by `events` must not repeat them. The statement itself is kept."""

READ_ONLY = "hookinbox_read_only"
"""Execution option: this connection only reads, so SQLite may begin without the write lock."""


@dataclass(frozen=True, slots=True)
class StoreOptions:
    """How hookinbox talks to its database. Every field has a safe default."""

    sqlite_synchronous: Literal["FULL", "NORMAL"] = "FULL"
    """FULL: a 2xx survives a power cut. NORMAL: survives a process crash only, ~3x faster."""
    busy_timeout: float = 5.0
    """Seconds a SQLite writer waits for the lock before the delivery is answered 503."""
    pool_size: int = 10
    max_overflow: int = 10
    pool_timeout: float = 5.0
    """Seconds to wait for a pooled connection before answering 503 (PostgreSQL)."""
    connect_timeout: float = 5.0
    tcp_timeout: float = 10.0
    """Seconds before a PostgreSQL connection whose server went silent (a host lost without
    a reset, a network partition) is given up, so that a failover is followed in seconds,
    not after the kernel's retransmission timeout (about 15 minutes). It sets libpq's
    `tcp_user_timeout` and TCP keepalives (idle `tcp_timeout / 2` seconds, then 3 probes);
    each of them given in the URL's query wins. 0: the system's defaults."""


def parse_url(url: str | URL) -> URL:
    """Accept the usual spellings and pick our drivers: `postgresql://` means psycopg 3."""
    try:
        parsed = make_url(_hosts_to_query(url) if isinstance(url, str) else url)
    except (ArgumentError, ValueError) as exc:  # ValueError: a port that is not a number
        raise ConfigurationError(f"not a database URL: {_without_password(url)!r}") from exc
    backend = parsed.get_backend_name()
    if backend in ("postgresql", "postgres"):
        require(f"a {backend}:// database URL", "postgres")  # the driver is an extra
        parsed = parsed.set(drivername="postgresql+psycopg")
        if _several_hosts(parsed) and "target_session_attrs" not in parsed.query:
            # Several hosts are a primary and its standbys: hookinbox writes on every
            # connection, so only the primary will do (a URL may still say otherwise).
            parsed = parsed.update_query_dict({"target_session_attrs": "read-write"})
        return parsed
    if backend == "sqlite":
        if parsed.get_driver_name() not in ("pysqlite", ""):
            raise ConfigurationError("hookinbox uses the standard sqlite3 driver")
        if not parsed.database or parsed.database == ":memory:":
            raise ConfigurationError(
                "SQLite needs a file (sqlite:///path.db): an in-memory database is lost on exit"
            )
        return parsed.set(drivername="sqlite")
    raise ConfigurationError(f"unsupported database {backend!r}: use sqlite:/// or postgresql://")


_NETLOC = re.compile(
    r"^(?P<scheme>[\w+]+)://(?P<userinfo>[^@/?#]*@)?(?P<hosts>[^/?#]*)(?P<rest>.*)$"
)


def _hosts_to_query(url: str) -> str:
    """libpq's multi-host form (`postgresql://u@h1:5432,h2:5433/db`) in SQLAlchemy's terms.

    SQLAlchemy reads one host and one port between `@` and `/`, and raises ValueError on the
    comma list libpq accepts there. Its own multi-host spelling is the query (`?host=h1,h2&
    port=5432,5433`), which its PostgreSQL dialect turns back into libpq's lists: so a comma
    list of hosts moves to the query, unchanged otherwise. Any other URL is left as it is.
    """
    match = _NETLOC.match(url)
    if match is None or "," not in match["hosts"]:
        return url
    hosts: list[str] = []
    ports: list[str] = []
    for entry in match["hosts"].split(","):
        host, port = _split_host_port(entry)
        hosts.append(host)
        ports.append(port)
    rest = match["rest"]
    path, _, query = rest.partition("?")
    if re.search(r"(^|&)(host|port)=", query):
        raise ConfigurationError(
            "give the hosts either in the URL (h1:5432,h2:5432) or as ?host=, not both"
        )
    moved = "host=" + quote(",".join(hosts), safe=",:")
    if any(ports):
        moved += "&port=" + ",".join(ports)
    query = f"{moved}&{query}" if query else moved
    return f"{match['scheme']}://{match['userinfo'] or ''}{path or '/'}?{query}"


def _split_host_port(entry: str) -> tuple[str, str]:
    """`h:5432` -> (h, 5432); `[::1]:5432` -> (::1, 5432): libpq's lists take IPv6 bare."""
    if entry.startswith("["):
        host, _, after = entry[1:].partition("]")
        return host, after.removeprefix(":")
    host, _, port = entry.partition(":")
    return host, port


def _without_password(url: str | URL) -> str:
    if isinstance(url, URL):
        return url.render_as_string(hide_password=True)
    return re.sub(r"(://[^:/@]*:)[^@/]*@", r"\1***@", url)


def build_engine(url: str | URL, options: StoreOptions) -> Engine:
    parsed = parse_url(url)
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(parsed, options)
    return _postgres_engine(parsed, options)


def _sqlite_engine(url: URL, options: StoreOptions) -> Engine:
    engine = create_engine(
        url,
        hide_parameters=HIDE_PARAMETERS,
        connect_args={"timeout": options.busy_timeout, "check_same_thread": False},
        pool_size=options.pool_size,
        max_overflow=options.max_overflow,
        pool_timeout=options.pool_timeout,
    )
    synchronous = options.sqlite_synchronous
    busy_ms = int(options.busy_timeout * 1000)

    @event.listens_for(engine, "connect")
    def _configure(dbapi_connection: Any, _record: Any) -> None:
        # sqlite3's own transaction handling begins lazily and deferred; a deferred transaction
        # that reads then writes can fail with SQLITE_BUSY without waiting. We issue
        # BEGIN IMMEDIATE ourselves (below) so every transaction queues for the write lock.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout={busy_ms}")
        if cursor.execute("PRAGMA page_count").fetchone()[0] == 0:
            # A new, empty file: pages freed by the pruner can be given back to the file
            # system (incremental vacuum, `_space.py`). Only a database created with it has
            # it (setting it later needs a full VACUUM). Never written to an existing file:
            # it may be read-only, or another connection may hold the write lock.
            cursor.execute("PRAGMA auto_vacuum=INCREMENTAL")
        _enable_wal(cursor, options.busy_timeout)  # readers never block the single writer
        cursor.execute(f"PRAGMA synchronous={synchronous}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(connection: Any) -> None:
        if connection.get_execution_options().get(READ_ONLY, False):
            connection.exec_driver_sql("BEGIN")
            return
        driver = connection.connection.driver_connection
        driver.execute("PRAGMA busy_timeout=0")  # this process polls instead (below)
        try:
            if not _poll_for_write_lock(driver, options.busy_timeout):
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

    return engine


LOCK_POLL = 0.001
"""Seconds between two tries for SQLite's write lock held by another process."""
SQLITE_BUSY = 5


def _poll_for_write_lock(sqlite: Any, timeout: float) -> bool:
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
            sqlite.execute("BEGIN IMMEDIATE")
            return True
        except sqlite3.OperationalError as error:
            code = getattr(error, "sqlite_errorcode", None)
            if code is None or code & 0xFF != SQLITE_BUSY:
                return False
        if time.monotonic() >= deadline:
            return False
        time.sleep(LOCK_POLL)


SQLITE_READONLY = 8
"""The primary result code of "attempt to write a readonly database" and its extended codes."""


def _is_read_only_error(error: BaseException) -> bool:
    code = getattr(error, "sqlite_errorcode", None)
    return isinstance(error, sqlite3.Error) and code is not None and code & 0xFF == SQLITE_READONLY


def _enable_wal(cursor: Any, timeout: float) -> None:
    """Switch a database to WAL (a persistent setting: once per file, not per connection).

    Changing the journal mode needs an exclusive lock and SQLite does not wait for it with the
    busy handler, so processes opening a new file at once retry here until one has switched.
    """
    deadline = time.monotonic() + timeout
    while cursor.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
        except sqlite3.OperationalError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.01)


def _several_hosts(url: URL) -> bool:
    hosts = url.query.get("host", url.host or "")
    return isinstance(hosts, tuple) or "," in hosts


def _postgres_engine(url: URL, options: StoreOptions) -> Engine:
    engine = create_engine(
        url,
        hide_parameters=HIDE_PARAMETERS,
        pool_size=options.pool_size,
        max_overflow=options.max_overflow,
        pool_timeout=options.pool_timeout,
        pool_pre_ping=True,  # a restarted server leaves dead connections in the pool
        connect_args=_connect_args(url, options),
    )

    @event.listens_for(engine, "handle_error")
    def _read_only_is_lost(context: ExceptionContext) -> None:
        # A write refused because the server is read-only: the session reached a standby (a
        # demoted primary that came back as one, or a URL without target_session_attrs).
        # Counted as a lost connection, the pool is dropped, new sessions look for the
        # primary, and the caller sees "unavailable" (503, retried) rather than a bug (500).
        if getattr(context.original_exception, "sqlstate", None) == READ_ONLY_SQL_TRANSACTION:
            context.is_disconnect = True

    @event.listens_for(engine, "do_connect")
    def _connect(dialect: Any, _record: Any, cargs: Any, cparams: Any) -> Any:
        connection = dialect.connect(*cargs, **cparams)
        try:
            check_encoding(connection.pgconn)
        except ConfigurationError:
            connection.close()
            raise
        return connection

    return engine


REQUIRED_ENCODING = "UTF8"
READ_ONLY_SQL_TRANSACTION = "25006"


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
        raise ConfigurationError(
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


KEEPALIVE_PROBES = 3


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


def listen_params(engine: Engine, options: StoreOptions) -> dict[str, Any]:
    """psycopg's connection parameters for a connection outside the pool (LISTEN).

    Taken from SQLAlchemy's own translation of the URL, so that every host list it accepts
    (`?host=h1:5432&host=h2:5432` above all, which libpq itself reads as one host named
    `h2:5432`) reaches the listener exactly as it reaches the pool.
    """
    _, params = engine.dialect.create_connect_args(engine.url)
    params.pop("context", None)  # SQLAlchemy's type adapters: the listener reads no rows
    return {**params, **_connect_args(engine.url, options)}


def is_sqlite(engine: Engine) -> bool:
    return engine.dialect.name == "sqlite"
