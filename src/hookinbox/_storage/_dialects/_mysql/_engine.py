"""MariaDB's engines and sessions: PyMySQL's engine (READ COMMITTED, UTC, the server checked at
the first connection), and the transactions' own rules, undone when a connection goes back
to the pool."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import URL

from hookinbox._errors import ConfigurationError, StoreUnavailable
from hookinbox._extras import require
from hookinbox._storage._dialects._base import Dialect
from hookinbox._storage._dialects._mysql._errors import ABORTED, classify
from hookinbox._storage._dialects._mysql._packet import PACKET
from hookinbox._storage._dialects._mysql._server import REQUIRED_CHARSET, check_server, connect_args
from hookinbox._storage._options import HIDE_PARAMETERS, StoreOptions

DRIVER = "pymysql"
MIGRATION_LOCK = "hookinbox_migrate"
MIGRATION_LOCK_SECONDS = 300
ASYNC_DRIVERS = ("aiomysql", "asyncmy")
"""SQLAlchemy's async drivers for MariaDB: refused by name (docs/async.md says why)."""
_AT_CHECKIN = "hookinbox_at_checkin"
"""Statements to run when the connection goes back to the pool (what a session set)."""


class MySQLEngines(Dialect):
    """The part of the dialect that answers for engines, URLs and transactions."""

    def normalize_url(self, url: URL) -> URL:
        """`mysql://`, `mariadb://`, `mysql+pymysql://` and `mysql+mysqldb://` all mean
        PyMySQL (the `mysql` extra); utf8mb4 unless the URL says otherwise (then refused at
        the first connection)."""
        require(f"a {url.get_backend_name()}:// database URL", "mysql")  # the driver
        if url.get_driver_name() in ASYNC_DRIVERS:
            raise ConfigurationError(
                f"hookinbox has no async worker on MariaDB ({url.get_driver_name()} is not "
                "supported): use mysql:// or mariadb://, the thread worker (docs/async.md)"
            )
        if url.get_driver_name() not in ("", DRIVER, "mysqldb"):
            raise ConfigurationError(
                f"hookinbox uses PyMySQL for MariaDB, not {url.get_driver_name()!r}: "
                "use mysql:// or mariadb://"
            )
        url = url.set(drivername=f"mysql+{DRIVER}")
        if "charset" not in url.query:
            url = url.update_query_dict({"charset": REQUIRED_CHARSET})
        return url

    def build_engine(self, url: URL, options: StoreOptions) -> Engine:
        return _engine(url, options)

    def missing_database(self, url: URL) -> str | None:
        """The server says so at the first connection (one line, exit 2)."""
        return None

    def read_only_engine(self, url: URL) -> Engine:
        engine = _engine(url, StoreOptions())

        @event.listens_for(engine, "begin")
        def _read_only(connection: Any) -> None:
            connection.exec_driver_sql("SET TRANSACTION READ ONLY")

        return engine

    def listen_params(self, engine: Engine, options: StoreOptions) -> dict[str, Any]:
        raise ConfigurationError("MariaDB has no LISTEN: its workers poll, or are sent datagrams")

    @contextlib.contextmanager
    def scratch_database(self, url: URL) -> Iterator[str]:
        """A new database `hookinbox_test_<random>` (utf8mb4) on that server, dropped with
        everything in it at the end: its user needs CREATE and DROP there."""
        name = f"hookinbox_test_{uuid.uuid4().hex[:12]}"
        admin = sa.create_engine(url, poolclass=sa.NullPool)
        try:
            with admin.connect() as connection:
                connection.exec_driver_sql(
                    f"CREATE DATABASE `{name}` CHARACTER SET {REQUIRED_CHARSET}"
                )
            try:
                yield url.set(database=name).render_as_string(hide_password=False)
            finally:
                with admin.connect() as connection:
                    connection.exec_driver_sql(f"DROP DATABASE IF EXISTS `{name}`")
        finally:
            admin.dispose()

    # -- transactions -----------------------------------------------------------------------

    def refuse_aborted(self, connection: Connection) -> None:
        """A deadlock that a handler caught and ignored: InnoDB rolled the whole transaction
        back (the claim with it), and the statements after it began a new one. Marked by the
        engine's error handler; read here without a round trip."""
        if connection.connection.info.get(ABORTED):
            raise RuntimeError(
                "the processing transaction was rolled back by a deadlock (one a handler "
                "caught and went on): rolled back, to be retried"
            )

    def check_writable(self, connection: Connection) -> None:
        # @@read_only does not stop a user with SUPER (or READ ONLY ADMIN): read it, so that
        # such a user is not ready on a replica either.
        if connection.exec_driver_sql("SELECT @@global.read_only").scalar():
            connection.invalidate()  # the next session may find the (new) primary
            raise StoreUnavailable("database unavailable: the server is read-only (read_only=ON)")

    def limit_statements(
        self, connection: Connection, seconds: float, *, local: bool = False
    ) -> None:
        """MariaDB's `max_statement_time` (a lock wait included) for this session, put back
        when the connection returns to the pool."""
        connection.exec_driver_sql(f"SET SESSION max_statement_time = {max(0.001, seconds):.3f}")
        _at_checkin(connection, "SET SESSION max_statement_time = DEFAULT")

    def lock_for_migration(self, connection: Connection) -> None:
        """A named lock of the session (DDL commits on its own in MariaDB, a transaction's
        lock would not last), released when the connection returns to the pool."""
        # Named locks are the server's: the name says which database is migrated.
        name = sa.func.concat(MIGRATION_LOCK, ":", sa.func.database())
        got = connection.execute(sa.select(sa.func.get_lock(name, MIGRATION_LOCK_SECONDS)))
        if got.scalar() != 1:
            raise StoreUnavailable("database unavailable: another process is migrating")
        _at_checkin(connection, f"DO RELEASE_LOCK(CONCAT('{MIGRATION_LOCK}:', DATABASE()))")

    def limit_lock_waits(self, connection: Connection, seconds: float) -> None:
        """Not bounded: MariaDB counts a metadata lock's wait in whole seconds
        (`lock_wait_timeout`), and no hookinbox older than schema 10, whose workers' long
        transactions these waits are about, ever ran on MariaDB."""

    def lock_for_copy(self, connection: Connection) -> None:
        """The session's named lock, taken by `lock_for_migration` when the copy began, is
        held until the connection goes back to the pool: nothing more to take."""


# -- the engine -------------------------------------------------------------------------------


def _engine(url: URL, options: StoreOptions) -> Engine:
    engine = create_engine(
        url,
        hide_parameters=HIDE_PARAMETERS,
        pool_size=options.pool_size,
        max_overflow=options.max_overflow,
        pool_timeout=options.pool_timeout,
        pool_pre_ping=True,  # a restarted server leaves dead connections in the pool
        pool_recycle=3600,  # before the server's wait_timeout closes them (8 h by default)
        isolation_level="READ COMMITTED",
        connect_args=connect_args(url, options),
    )

    @event.listens_for(engine, "connect")
    def _configure(dbapi_connection: Any, record: Any) -> None:
        with dbapi_connection.cursor() as cursor:
            cursor.execute("SET time_zone = '+00:00'")
            cursor.execute(
                "SELECT VERSION(), @@character_set_connection, @@character_set_database,"
                " DATABASE(), @@max_allowed_packet"
            )
            version, connection_set, database_set, database, packet = cursor.fetchone()
        check_server(str(version), str(connection_set), str(database_set), database, packet)
        # The session's packet is fixed now (a later SET GLOBAL reaches new sessions only).
        record.info[PACKET] = int(packet)

    @event.listens_for(engine, "begin")
    def _begin(connection: Any) -> None:
        connection.connection.info.pop(ABORTED, None)

    event.listen(engine, "handle_error", classify)

    return engine


def _at_checkin(connection: Connection, statement: str) -> None:
    """Run `statement` when this connection goes back to its pool (on any engine: one built
    elsewhere, as a benchmark's or a framework's, too)."""
    statements = connection.connection.info.setdefault(_AT_CHECKIN, [])
    if statement not in statements:
        statements.append(statement)
    pool = connection.engine.pool
    if not event.contains(pool, "checkin", _reset):
        event.listen(pool, "checkin", _reset)


def _reset(dbapi_connection: Any, record: Any) -> None:
    statements = record.info.pop(_AT_CHECKIN, None) if record is not None else None
    if statements and dbapi_connection is not None:
        with contextlib.suppress(Exception), dbapi_connection.cursor() as cursor:
            for statement in statements:
                cursor.execute(statement)
