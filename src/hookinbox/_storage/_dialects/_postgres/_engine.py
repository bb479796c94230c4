"""PostgreSQL's engines and sessions: psycopg's (and the async drivers') engine, its pool and
checks, and the transactions' own rules."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import URL, ExceptionContext

from hookinbox._errors import ConfigurationError, StoreUnavailable
from hookinbox._extras import require
from hookinbox._storage._dialects._base import Dialect
from hookinbox._storage._dialects._borrowed import DRIVER
from hookinbox._storage._dialects._postgres._connect import (
    asyncpg_connect_args,
    check_psycopg,
    checking_asyncpg,
    connect_args,
    several_hosts,
)
from hookinbox._storage._dialects._postgres._errors import (
    FAILED_STATEMENT,
    LOCK_NOT_AVAILABLE,
    classify,
)
from hookinbox._storage._dialects._postgres._listen import listen
from hookinbox._storage._dialects._postgres._scratch import drop_scratch_schema
from hookinbox._storage._options import HIDE_PARAMETERS, StoreOptions

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine


ADVISORY_LOCK_KEY = 0x686F6F6B696E
"""An arbitrary constant naming hookinbox's migration lock among the application's own locks."""
_IN_ERROR = 3
"""libpq's PQTRANS_INERROR, as psycopg 3 and psycopg2 report `info.transaction_status`."""
_ABORTED = (
    "the processing transaction was aborted by an earlier database error (one a handler "
    "caught and went on): rolled back, to be retried"
)


class PostgresEngines(Dialect):
    """The part of the dialect that answers for engines, URLs and transactions."""

    def normalize_url(self, url: URL) -> URL:
        # The driver: psycopg, with the async one the URL names where it names one.
        extra = self.async_drivers.get(url.drivername.partition("+")[2], "postgres")
        require(f"a {url.drivername}:// database URL", extra)
        if url.drivername.partition("+")[2] == DRIVER:  # `postgres://` names no dialect
            return url
        url = url.set(drivername="postgresql+psycopg")
        if several_hosts(url) and "target_session_attrs" not in url.query:
            # Several hosts are a primary and its standbys: hookinbox writes on every
            # connection, so only the primary will do (a URL may still say otherwise).
            url = url.update_query_dict({"target_session_attrs": "read-write"})
        return url

    def build_engine(self, url: URL, options: StoreOptions) -> Engine:
        return _engine(url, options)

    def async_url(self, url: URL) -> URL | None:
        if super().async_url(url) is None:
            return None
        if several_hosts(url) and "target_session_attrs" not in url.query:
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
        return {**params, **connect_args(engine.url, options)}

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
                drop_scratch_schema(admin, schema)
        finally:
            admin.dispose()

    # -- transactions -----------------------------------------------------------------------

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
            mark = connection.connection.info.get(FAILED_STATEMENT)
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


# -- the engine -------------------------------------------------------------------------------


def _engine(url: URL, options: StoreOptions) -> Engine:
    engine = create_engine(
        url, **_engine_arguments(options), connect_args=connect_args(url, options)
    )
    _watch(engine, check_psycopg)
    return engine


def _async_engine(url: URL, options: StoreOptions) -> AsyncEngine:
    """The async worker's engine: asyncpg, or psycopg's async mode, with the same checks."""
    from sqlalchemy.ext.asyncio import create_async_engine

    if url.get_driver_name() == "asyncpg":
        # asyncpg takes no `options` argument (SQLAlchemy passes the URL's query to its
        # connect() as keywords): its `-c` settings go as asyncpg's `server_settings`.
        arguments, check = asyncpg_connect_args(url, options), checking_asyncpg(options)
        url = url.difference_update_query(["options"])
    else:  # psycopg_async takes libpq's parameters, as psycopg does
        arguments, check = connect_args(url, options), check_psycopg
    # Last in, first out: the connection an attempt just gave back serves the next one, so a
    # busy worker's connections never rest long enough to be pinged (`_ping_after_idle`).
    arguments_of_pool = {
        **_engine_arguments(options),
        "pool_pre_ping": False,
        "pool_use_lifo": True,
    }
    engine = create_async_engine(url, **arguments_of_pool, connect_args=arguments)
    _watch(engine.sync_engine, check, marks_failed_statements=check is not check_psycopg)
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
        classify(context, marks_failed_statements=marks_failed_statements)

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
