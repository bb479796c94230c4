"""MariaDB (10.6+, through PyMySQL): a pooled server, concurrent writers, no LISTEN.

The engine reads committed data (READ COMMITTED: no gap locks, so concurrent upserts of new
events do not deadlock on each other's gaps; docs/storage.md has the measurement), speaks
utf8mb4 in UTC, and refuses at the first connection a server that is not MariaDB 10.6 or later
(the lease needs `SKIP LOCKED`, the upsert `INSERT ... RETURNING`, the claim `DELETE ...
RETURNING`: MySQL 8.0 has the first and neither of the others), a connection or a database
whose character set is not utf8mb4, and a `max_allowed_packet` under 4 MiB. Each session keeps
the packet the server reported when it opened: group commit cuts its batch into statements that
fit it (every value counted escaped, at worst), a row that cannot fit alone is `BodyTooLarge`
(413) rather than sent, and an inbox whose body limit no statement can carry is refused when it
starts receiving (`check_body_limit`). A write refused because the server is read-only counts
as a lost connection (503), as on PostgreSQL; a deadlock (1213) or a lock wait timeout (1205)
is an `OperationalError`, so 503 + Retry-After, and a deadlock marks the error (a transaction
of hookinbox's own, as ingest's, is run again first: `Store.retry_deadlocks`) and the
transaction aborted (InnoDB rolled it back whole: `refuse_aborted`).

The upsert is `INSERT ... ON DUPLICATE KEY UPDATE ... RETURNING` (`MySQLUpsert` speaks the
`on_conflict_*` of the other dialects); group commit's batch is a multi-row VALUES upsert and
its log rows, in the caller's transaction. Payload search reads the body with `JSON_VALUE`
(a body that is not JSON reads NULL, never an error), and a body whose path crosses a repeated
key in Python (`payload_unsure`). Workers poll with a cheap due read.
"""

from __future__ import annotations

import contextlib
import functools
import re
import uuid
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar

import sqlalchemy as sa
from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.dialects import mysql, registry
from sqlalchemy.dialects.mysql.mysqldb import MySQLDialect_mysqldb
from sqlalchemy.engine import URL, ExceptionContext
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.schema import CreateTable
from sqlalchemy.sql.compiler import DDLCompiler, TypeCompiler

from hookinbox._errors import BodyTooLarge, ConfigurationError, StoreUnavailable
from hookinbox._extras import require
from hookinbox._records import Pressure
from hookinbox._storage._batch import (
    EVENT_COLUMNS,
    Group,
    Row,
    log_rows,
    upsert_parameters,
)
from hookinbox._storage._dialects._base import Dialect, Upsert
from hookinbox._storage._dialects._borrowed import DRIVER as BORROWED
from hookinbox._storage._dialects._borrowed import OwnsNoTransactions
from hookinbox._storage._errors import mark_deadlock, name_unique_violation, translate_errors
from hookinbox._storage._options import HIDE_PARAMETERS, StoreOptions
from hookinbox._storage._schema import events
from hookinbox._storage._types import LongBinary, LongText, UTCDateTime

if TYPE_CHECKING:
    from alembic.operations import Operations

    from hookinbox._model import NewDelivery
    from hookinbox._records import PayloadMatch
    from hookinbox._storage._transactions import Transactions

OLD_LEASE = "hookinbox schema 9: a process of an older hookinbox tried to lease; upgrade it"
DRIVER = "pymysql"
REQUIRED_CHARSET = "utf8mb4"
COLLATION = "utf8mb4_nopad_bin"
MIN_MARIADB = (10, 6)
MIN_PACKET = 4 * 1024 * 1024
"""The smallest `max_allowed_packet` accepted: a 1 MiB body (the default body limit) is sent
as an escaped literal, up to twice its size, beside its headers."""
STATEMENT_BYTES = 8 * 1024
"""Bytes of a packet kept for a statement's own text around its rows' values (group commit's
upsert, or a single delivery's as SQLAlchemy writes it: each under 2 KiB) and the command's
header."""
ROW_ALLOWANCE = 64 * 1024
"""Bytes a row may take besides its body when the body limit is checked at start: the headers
a source keeps, the event's id and type, its times, an invalid event's reason. A row's real
size is counted when it is written."""
_QUOTES = 16
"""A binary literal's bytes around its escaped bytes (`X'...'`, `_binary'...'`)."""
_MIB = 1024 * 1024
_PACKET = "hookinbox_max_allowed_packet"
"""The connection's `max_allowed_packet`, as the server said when the session opened."""
MIGRATION_LOCK = "hookinbox_migrate"
MIGRATION_LOCK_SECONDS = 300
ER_LOCK_DEADLOCK = 1213
ER_DUP_ENTRY = 1062
ER_OPTION_PREVENTS_STATEMENT = 1290
"""The server runs with --read-only (a replica, or set by an operator)."""
ER_READ_ONLY_MODE = 1836
_ABORTED = "hookinbox_aborted"
ASYNC_DRIVERS = ("aiomysql", "asyncmy")
"""SQLAlchemy's async drivers for MariaDB: refused by name (docs/async.md says why)."""
_AT_CHECKIN = "hookinbox_at_checkin"
"""Statements to run when the connection goes back to the pool (what a session set)."""


class MySQL(Dialect):
    name: ClassVar[str] = "mysql"
    single_writer: ClassVar[bool] = False
    listens: ClassVar[bool] = False
    returns_joined_rows: ClassVar[bool] = False
    autocommit_batches: ClassVar[bool] = False
    prune_busy_batch_seconds: ClassVar[float] = 0.02
    django_vendors: ClassVar[tuple[str, ...]] = ("mysql",)  # MariaDB's, too

    # -- engines and URLs -------------------------------------------------------------------

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

    @contextlib.contextmanager
    def housekeeping(self, store: Transactions) -> Iterator[Connection]:
        with store.transaction() as connection:
            yield connection

    def refuse_aborted(self, connection: Connection) -> None:
        """A deadlock that a handler caught and ignored: InnoDB rolled the whole transaction
        back (the claim with it), and the statements after it began a new one. Marked by the
        engine's error handler; read here without a round trip."""
        if connection.connection.info.get(_ABORTED):
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

    # -- statements -------------------------------------------------------------------------

    def insert(self, table: sa.TableClause) -> MySQLUpsert:
        return MySQLUpsert(table)

    def write_batch(
        self, connection: Connection, deliveries: Sequence[NewDelivery], groups: list[Group]
    ) -> dict[tuple[str, str], Row]:
        rows: dict[tuple[str, str], Row] = {}
        for part in _parts(groups, _packet(connection)):
            rows.update(_write_part(connection, deliveries, part))
        return rows

    def check_row_size(self, connection: Connection, delivery: NewDelivery) -> None:
        """A delivery stored with a statement of its own: refused with `BodyTooLarge` (413)
        if its row cannot fit the connection's packet, rather than sent for the server to
        drop the connection (503, for as long as the provider retries)."""
        _fitting_row(Group([0], delivery, delivery.received_at), _packet(connection))

    def check_body_limit(self, store: Transactions, max_body_size: int) -> None:
        """Refuse a body limit past what one statement carries on this server: its packet,
        read from a session (a lower one on some sessions is answered 413 per delivery)."""
        with translate_errors(), store.engine.connect() as connection:
            packet = _packet(connection)
        if max_body_size > largest_body(packet):
            needed = packet_for(max_body_size)
            raise ConfigurationError(
                f"max_body_size is {max_body_size} bytes, but MariaDB's max_allowed_packet is "
                f"{packet} bytes, which carries a body of at most {largest_body(packet)} bytes in "
                "one statement (a body is sent escaped, up to twice its size): set "
                f"max_allowed_packet to at least {needed} ({-(-needed // _MIB)}M) on the "
                "server, or lower max_body_size"
            )

    def payload_value(self, match: PayloadMatch, *, careful: bool = False) -> sa.ColumnElement[Any]:
        """`JSON_VALUE` reads NULL from a body that is not JSON (never an error: `careful`
        has nothing to add), from a JSON null, an object or an array (PostgreSQL's `#>>`
        gives the latter two as JSON text). The path is a bound parameter. An index reads an
        array's item only (MariaDB's `$.a[0]` would read `a` itself when it is no array). Of
        a repeated key it reads the first value: `payload_unsure` finds those bodies."""
        text = _body_text()
        path = sa.bindparam("payload_path", _json_path(match.path), type_=sa.Text)
        # As PostgreSQL's #>> does: booleans read true/false (JSON_VALUE says 1 and 0).
        extracted = sa.func.json_extract(text, path, type_=sa.Text)
        value = sa.case(
            (sa.func.json_type(extracted) == "BOOLEAN", extracted),
            else_=sa.func.json_value(text, path, type_=sa.Text),
        )
        arrays = [
            sa.func.json_type(
                sa.func.json_extract(
                    text,
                    sa.bindparam(
                        f"payload_list_{depth}", _json_path(match.path[:depth]), type_=sa.Text
                    ),
                )
            )
            == "ARRAY"
            for depth, segment in enumerate(match.path)
            if segment.isdigit()
        ]
        return sa.case((sa.and_(*arrays), value), else_=None) if arrays else value

    def payload_unsure(self, match: PayloadMatch) -> sa.ColumnElement[bool] | None:
        """A body in which a key of the path is repeated in its object (`{"a": 1, "a": 2}`):
        `JSON_VALUE` reads the first, Python's parser (a handler's) the last. `JSON_REMOVE`
        takes the first out: if the key is still there, it was repeated. A body that is not
        JSON reads NULL."""
        text = _body_text()
        repeated = []
        for depth, segment in enumerate(match.path, start=1):
            if segment.isdigit():
                continue  # an array's index: an item is never repeated
            path = sa.bindparam(
                f"payload_key_{depth}", _json_path(match.path[:depth]), type_=sa.Text
            )
            remaining = sa.func.json_remove(text, path)
            repeated.append(sa.func.json_contains_path(remaining, "one", path) == 1)
        return sa.or_(*repeated) if repeated else None

    def time_bucket(
        self, column: sa.ColumnElement[Any], start: datetime, width: timedelta
    ) -> sa.ColumnElement[Any]:
        elapsed = sa.func.timestampdiff(
            sa.literal_column("MICROSECOND"), sa.literal(start, UTCDateTime()), column
        )
        return sa.func.floor(elapsed / round(width.total_seconds() * 1_000_000))

    def notify(self, connection: Connection, channel: str) -> None:
        """No LISTEN: workers poll with a cheap due read (or `serve`'s datagram)."""

    # -- the database's own state -----------------------------------------------------------

    def now(self, connection: Connection) -> datetime:
        now: datetime = connection.exec_driver_sql("SELECT UTC_TIMESTAMP(6)").scalar_one()
        return now.replace(tzinfo=UTC)

    def pressure_mark(self, connection: Connection) -> object:
        return connection.exec_driver_sql("SELECT UTC_TIMESTAMP(6)").scalar_one()

    def pressure_since(self, connection: Connection, mark: object) -> Pressure:
        others, waiting = connection.execute(_OTHERS, {"since": mark}).one()
        return Pressure(int(others or 0), int(waiting or 0))

    # Space after a prune: InnoDB reuses freed pages itself (OPTIMIZE TABLE gives it back).

    def checkpoint_passive(self, store: Transactions) -> None:
        """InnoDB checkpoints on its own."""

    def free_pages(self, store: Transactions) -> int:
        return 0

    def give_back_pages(self, store: Transactions, pages: int) -> int:
        return 0

    # -- migrations -------------------------------------------------------------------------

    def create_notify_trigger(
        self, op: Operations, table: str, channel: str, function: str
    ) -> None:
        """No LISTEN, nothing to notify."""

    def lock_tables(self, op: Operations, *tables: str) -> None:
        """MariaDB commits at each DDL statement, so a table lock cannot span the step; no
        hookinbox older than schema 10 ever ran on MariaDB, so none writes while it runs."""

    def set_fill_factor(self, op: Operations, table: str, percent: int) -> None:
        """InnoDB's fill factor is the server's (`innodb_fill_factor`), not a table's."""

    def create_index_if_missing(
        self, op: Operations, name: str, table: str, columns: str, where: str
    ) -> None:
        # No partial indexes: the whole table's.
        op.execute(f"CREATE INDEX IF NOT EXISTS {name} ON {table} ({columns})")

    def drop_index_if_exists(self, op: Operations, table: str, name: str) -> None:
        op.execute(f"DROP INDEX IF EXISTS {name} ON {table}")

    def queue_new_events(self, op: Operations) -> None:
        # A row trigger; an upsert that updates (a duplicate) fires no INSERT trigger.
        op.execute(
            "CREATE TRIGGER IF NOT EXISTS hookinbox_events_queue AFTER INSERT ON hookinbox_events"
            " FOR EACH ROW INSERT INTO hookinbox_event_queue"
            " (id, state, next_attempt_at, received_at, attempts)"
            " SELECT NEW.id, NEW.status, NEW.next_attempt_at, NEW.received_at, NEW.attempts"
            f" FROM DUAL WHERE NEW.status NOT IN ({_CLOSED})"
        )

    def mirror_queue_changes(self, op: Operations) -> None:
        # MariaDB's triggers name no columns: an update that leaves the copied ones as they
        # were (a duplicate delivery's upsert) writes nothing. `done` is
        # `_queue_copy.TOMBSTONE`.
        unchanged = " AND ".join(
            f"NEW.{column} <=> OLD.{column}"
            for column in ("status", "next_attempt_at", "attempts", "received_at")
        )
        columns = " (id, state, next_attempt_at, received_at, attempts)"
        tombstone = (
            f"INSERT INTO hookinbox_event_queue{columns}"
            " VALUES (OLD.id, 'done', OLD.next_attempt_at, OLD.received_at, OLD.attempts)"
            " ON DUPLICATE KEY UPDATE state = 'done'"
        )
        op.execute(
            "CREATE TRIGGER IF NOT EXISTS hookinbox_events_mirror AFTER UPDATE"
            " ON hookinbox_events FOR EACH ROW BEGIN"
            f" IF NEW.status NOT IN ({_CLOSED}) THEN"
            f" IF NOT ({unchanged}) THEN"
            f" INSERT INTO hookinbox_event_queue{columns}"
            " VALUES (NEW.id,"
            " CASE WHEN NEW.status = 'processing' THEN 'pending' ELSE NEW.status END,"
            " NEW.next_attempt_at, NEW.received_at, NEW.attempts)"
            " ON DUPLICATE KEY UPDATE state = VALUES(state),"
            " next_attempt_at = VALUES(next_attempt_at), received_at = VALUES(received_at),"
            " attempts = VALUES(attempts);"
            " END IF;"
            f" ELSEIF OLD.status NOT IN ({_CLOSED}) THEN {tombstone};"
            " END IF; END"
        )
        op.execute(
            "CREATE TRIGGER IF NOT EXISTS hookinbox_events_mirror_deleted AFTER DELETE"
            f" ON hookinbox_events FOR EACH ROW BEGIN IF OLD.status NOT IN ({_CLOSED}) THEN"
            f" {tombstone}; END IF; END"
        )

    def stop_mirroring_queue(self, op: Operations) -> None:
        op.execute("DROP TRIGGER IF EXISTS hookinbox_events_mirror")
        op.execute("DROP TRIGGER IF EXISTS hookinbox_events_mirror_deleted")

    def refuse_old_leases(self, op: Operations) -> None:
        # MariaDB's triggers name no columns: each compares the row before and after.
        for name, table, when in (
            ("hookinbox_events_old_lease", "hookinbox_events",
             "NEW.lease_token IS NOT NULL AND NOT (NEW.lease_token <=> OLD.lease_token)"),
            ("hookinbox_outbox_old_lease", "hookinbox_outbox", "NEW.status = 'delivering'"),
        ):  # fmt: skip
            op.execute(
                f"CREATE TRIGGER IF NOT EXISTS {name} BEFORE UPDATE ON {table} FOR EACH ROW"
                f" BEGIN IF {when} THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{OLD_LEASE}';"
                " END IF; END"
            )

    # -- Django's connections ---------------------------------------------------------------

    def borrowed_url(self, settings: Mapping[str, Any]) -> URL:
        """Django's MySQL backend (mysqlclient) as a name only: nothing dials it (no LISTEN),
        so Django's OPTIONS stay Django's. `mysql+`, never `mariadb+`: hookinbox's column
        types and table options are compiled for the dialect named `mysql`."""
        host = str(settings.get("HOST") or "")
        port = settings.get("PORT")
        return URL.create(
            f"mysql+{BORROWED}",
            username=settings.get("USER") or None,
            password=settings.get("PASSWORD") or None,
            host=None if host.startswith("/") else host or None,
            port=int(port) if port else None,
            database=settings.get("NAME") or None,
            query={"unix_socket": host} if host.startswith("/") else {},
        )


_CLOSED = "'processed', 'unhandled'"
"""The statuses of an event whose work is over (no queue row), in the triggers' SQL."""


# -- the upsert -------------------------------------------------------------------------------


class MySQLUpsert(mysql.Insert, Upsert):
    """`INSERT ... ON DUPLICATE KEY UPDATE`, spoken as the other dialects' `ON CONFLICT`.

    The conflict target is not named in MariaDB: any unique key conflicts (hookinbox's tables
    have one besides the generated primary key). A `where` becomes a CASE on each column
    set (assigned left to right, so the columns it reads are set last): the row stays as it
    was when it is false, and RETURNING then returns the row as it stands. `DO NOTHING` is
    `INSERT IGNORE`, which returns no row for the key that existed.
    """

    inherit_cache = True

    @property
    def excluded(self) -> Any:
        return self.inserted

    def on_conflict_do_update(
        self,
        *,
        index_elements: Sequence[Any] = (),
        set_: Mapping[str, Any],
        where: sa.ColumnElement[bool] | None = None,
    ) -> MySQLUpsert:
        table = self.table
        if where is None:
            return self.on_duplicate_key_update(list(set_.items()))
        where = _new_values(where)
        read = {c.name for c in sa.sql.visitors.iterate(where) if isinstance(c, sa.Column)}
        ordered = sorted(set_.items(), key=lambda item: item[0] in read)
        assigned = [
            (name, sa.case((where, _new_values(value)), else_=table.c[name]))
            for name, value in ordered
        ]
        return self.on_duplicate_key_update(assigned)

    def on_conflict_do_nothing(self, *, index_elements: Sequence[Any] = ()) -> MySQLUpsert:
        return self.prefix_with("IGNORE")


def _new_values(clause: Any) -> Any:
    """`excluded.<column>` (SQLAlchemy's `inserted`) as `VALUES(<column>)` inside a clause:
    SQLAlchemy replaces it only where it is a value set on its own."""

    def replace(element: Any, **_kw: Any) -> Any:
        table = getattr(element, "table", None)
        if isinstance(element, sa.Column | sa.sql.elements.ColumnClause) and (
            isinstance(table, sa.Alias) and table.name == "inserted"
        ):
            return sa.func.values(sa.literal_column(f"`{element.name}`"))
        return None

    if not isinstance(clause, sa.ColumnElement):
        return clause
    column: sa.ColumnElement[Any] = clause
    no_options: dict[str, Any] = {}
    return sa.sql.visitors.replacement_traverse(column, no_options, replace)


# -- column types ------------------------------------------------------------------------------
# MariaDB's plain types are too small for hookinbox's columns: DATETIME keeps whole seconds,
# BLOB and TEXT 64 KiB. A body (1 MiB by default) needs LONGBLOB, a time microseconds.


@compiles(CreateTable, "mysql")
def _create_table(element: CreateTable, compiler: DDLCompiler, **kw: Any) -> str:
    """hookinbox's tables compare text byte for byte (`evt_A` is not `evt_a`, `a ` is not
    `a`: a unique key must not fold two events into one), whatever the database's default
    collation; other tables are left to it."""
    sql: str = compiler.visit_create_table(element, **kw)  # type: ignore[no-untyped-call]
    if element.element.name.startswith("hookinbox_"):
        sql = sql.rstrip() + f" DEFAULT CHARSET={REQUIRED_CHARSET} COLLATE={COLLATION}"
    return sql


@compiles(UTCDateTime, "mysql")
def _datetime(type_: UTCDateTime, compiler: TypeCompiler, **kw: Any) -> str:
    return "DATETIME(6)"


@compiles(LongText, "mysql")
def _text(type_: LongText, compiler: TypeCompiler, **kw: Any) -> str:
    return "LONGTEXT"


@compiles(LongBinary, "mysql")
def _blob(type_: LongBinary, compiler: TypeCompiler, **kw: Any) -> str:
    return "LONGBLOB"


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
        connect_args=_connect_args(url, options),
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
        record.info[_PACKET] = int(packet)

    @event.listens_for(engine, "begin")
    def _begin(connection: Any) -> None:
        connection.connection.info.pop(_ABORTED, None)

    event.listen(engine, "handle_error", _classify)

    return engine


_WRITTEN_TABLE = re.compile(
    r"^\s*(?:INSERT|UPDATE|REPLACE)\s+(?:IGNORE\s+)?(?:INTO\s+)?`?(\w+)`?", re.I
)
_DUPLICATE_KEY = re.compile(r"for key '(?:[^']*\.)?([^']+)'")


def _name_the_key(context: ExceptionContext) -> None:
    """MariaDB's duplicate-key error names the index, not its table or columns: read them
    (the table from the statement, the columns from the catalog) for the business-key match
    (`unique_violation`), while the transaction is still usable (InnoDB undid the statement
    only)."""
    error = context.original_exception
    table = _WRITTEN_TABLE.match(context.statement or "")
    key = _DUPLICATE_KEY.search(str(getattr(error, "args", ("", ""))[-1]))
    if table is None or key is None or context.connection is None:
        return
    with contextlib.suppress(Exception):
        driver = context.connection.connection.dbapi_connection
        with driver.cursor() as cursor:  # type: ignore[union-attr]
            cursor.execute(
                "SELECT column_name FROM information_schema.statistics WHERE table_schema ="
                " DATABASE() AND table_name = %s AND index_name = %s",
                (table[1], key[1]),
            )
            columns = frozenset(str(row[0]) for row in cursor.fetchall())
        name_unique_violation(error, table[1], columns, key[1])


def check_server(
    version: str, connection_set: str, database_set: str, database: object, packet: object
) -> None:
    """Refuse, in one line, a server or a database hookinbox cannot run on."""
    if "mariadb" not in version.lower():
        raise ConfigurationError(
            f"the server is MySQL {version}; hookinbox needs MariaDB 10.6 or later "
            "(MySQL has no INSERT ... RETURNING)"
        )
    numbers = tuple(int(part) for part in version.split("-")[0].split(".")[:2])
    if numbers < MIN_MARIADB:
        raise ConfigurationError(
            f"the server is MariaDB {version}; hookinbox needs 10.6 or later (SKIP LOCKED)"
        )
    if connection_set != REQUIRED_CHARSET:
        raise ConfigurationError(
            f"the connection's character set is {connection_set}; hookinbox needs "
            f"{REQUIRED_CHARSET} (leave charset= out of the URL, or set it to utf8mb4)"
        )
    if database is not None and database_set != REQUIRED_CHARSET:
        raise ConfigurationError(
            f"database {database!r} has the character set {database_set}; hookinbox needs "
            f"{REQUIRED_CHARSET} (ALTER DATABASE ... CHARACTER SET utf8mb4)"
        )
    if isinstance(packet, int) and packet < MIN_PACKET:
        raise ConfigurationError(
            f"the server's max_allowed_packet is {packet} bytes; hookinbox needs at least "
            f"{MIN_PACKET} (4 MiB: a 1 MiB body is sent escaped)"
        )


def _connect_args(url: URL, options: StoreOptions) -> dict[str, Any]:
    defaults: dict[str, Any] = {"connect_timeout": max(1, round(options.connect_timeout))}
    if options.tcp_timeout > 0:
        # A silent server is given up after this long, as on PostgreSQL.
        defaults["read_timeout"] = max(1, round(options.tcp_timeout * 6))
        defaults["write_timeout"] = max(1, round(options.tcp_timeout))
    return {key: value for key, value in defaults.items() if key not in url.query}


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


def _code(error: BaseException | None) -> int | None:
    args = getattr(error, "args", ())
    return args[0] if args and isinstance(args[0], int) else None


# -- group commit's statements ------------------------------------------------------------------

_MAX_ROWS = 1_000


def largest_body(packet: int) -> int:
    """The largest body one statement carries alone on a server whose `max_allowed_packet` is
    `packet`: every byte escaped to two (PyMySQL sends each as two hex digits; mysqlclient,
    Django's driver, doubles a backslash or a quote), beside `ROW_ALLOWANCE` bytes of the
    rest of its row and the statement's own text."""
    return (packet - STATEMENT_BYTES - ROW_ALLOWANCE - _QUOTES) // 2


def packet_for(body_size: int) -> int:
    """The smallest `max_allowed_packet` whose statements carry a body of `body_size`."""
    return 2 * body_size + _QUOTES + ROW_ALLOWANCE + STATEMENT_BYTES


def _packet(connection: Connection) -> int:
    """The session's `max_allowed_packet`: read when hookinbox's engine opened it; on Django's
    connection, when the engine first connected; else the least hookinbox accepts."""
    packet = connection.connection.info.get(_PACKET, getattr(connection.dialect, _PACKET, None))
    return packet if isinstance(packet, int) else MIN_PACKET


def _literal_bytes(value: object) -> int:
    """The most bytes `value` takes as a literal in a statement, escaped."""
    if value is None:
        return 4
    if isinstance(value, bytes | bytearray):
        return 2 * len(value) + _QUOTES
    if isinstance(value, str):
        size = len(value) if value.isascii() else len(value.encode("utf-8", "surrogatepass"))
        return 2 * size + 2
    return 32  # a number, a flag, a time


_Part = list[tuple[Group, list[object]]]
"""A statement's groups, each with its row's values."""


def _parts(groups: list[Group], packet: int) -> Iterator[_Part]:
    """The groups cut so that each statement, its values escaped at worst, fits `packet`: a
    group's row that cannot fit even alone is `BodyTooLarge` (a 413, never sent)."""
    room = packet - STATEMENT_BYTES
    part: _Part = []
    size = 0
    for group in groups:
        values, row = _fitting_row(group, packet)
        if part and (size + row > room or len(part) >= _MAX_ROWS):
            yield part
            part, size = [], 0
        part.append((group, values))
        size += row
    if part:
        yield part


def _fitting_row(group: Group, packet: int) -> tuple[list[object], int]:
    """The group's row of values and its most bytes in a statement; `BodyTooLarge` if a
    statement of that row alone would pass `packet`."""
    values = upsert_parameters([group], _time)
    size = _ROW_SYNTAX + sum(map(_literal_bytes, values))
    if size > packet - STATEMENT_BYTES:
        raise BodyTooLarge(
            f"body of {len(group.first.body)} bytes: more than the database takes in one "
            f"statement ({largest_body(packet)} bytes at most: MariaDB's max_allowed_packet "
            f"is {packet} bytes)"
        )
    return values, size


def _write_part(
    connection: Connection, deliveries: Sequence[NewDelivery], part: _Part
) -> dict[tuple[str, str], Row]:
    groups = [group for group, _ in part]
    parameters = [value for _, values in part for value in values]
    result = connection.exec_driver_sql(_upsert(len(groups)), tuple(parameters))
    rows = {(r[1], r[2]): (r[0], r[3], r[4], r[5], r[6] == "webhook") for r in result}
    connection.exec_driver_sql(_LOG, log_rows(deliveries, groups, rows, _time))
    return rows


_LOG = (
    "INSERT INTO hookinbox_deliveries (received_at, source, event_id, duplicate, key_conflict) "
    "VALUES (%s, %s, %s, %s, %s)"
)

_ON_DUPLICATE = """
ON DUPLICATE KEY UPDATE
    key_conflicts = key_conflicts + CASE
        WHEN body_sha256 <> VALUES(body_sha256) AND received_via = 'webhook'
        THEN VALUES(delivery_count) ELSE 0 END,
    delivery_count = delivery_count + VALUES(delivery_count),
    last_delivery_at = GREATEST(last_delivery_at, VALUES(last_delivery_at))
RETURNING id, source, event_id, delivery_count, body_sha256, status, received_via
"""
# An event reconcile stored counted no delivery, and its body (the API's JSON) conflicts
# with no delivery's: as the other dialects' batch statements (`_batch.py`).


_ROW = "(%s, %s, %s, %s, %s, %s, %s, %s, %s, 0, 0, %s, %s, 0, %s, %s)"
_ROW_SYNTAX = len(_ROW) + 2
"""A row's bytes in the statement besides its values (its placeholders counted: more)."""


@functools.lru_cache(maxsize=64)
def _upsert(rows: int) -> str:
    values = ", ".join([_ROW] * rows)
    return f"INSERT INTO hookinbox_events ({EVENT_COLUMNS}) VALUES {values}" + _ON_DUPLICATE


def _time(value: datetime | None) -> datetime | None:
    """A naive UTC datetime: PyMySQL writes the wall clock and drops the zone."""
    return None if value is None else value.astimezone(UTC).replace(tzinfo=None)


def _body_text() -> sa.ColumnElement[Any]:
    """The body as utf8mb4 text, for MariaDB's JSON functions."""
    return sa.func.convert(events.c.body.op("USING")(sa.literal_column(REQUIRED_CHARSET)))


def _json_path(segments: tuple[str, ...]) -> str:
    parts = [f"[{s}]" if s.isdigit() else '."' + s.replace('"', '\\"') + '"' for s in segments]
    return "$" + "".join(parts)


# -- the pruner's view of the others ------------------------------------------------------------

_OTHERS = sa.text(
    "SELECT SUM(command <> 'Sleep' OR time_ms < TIMESTAMPDIFF(MICROSECOND, :since,"
    "           UTC_TIMESTAMP(6)) / 1000),"
    "       SUM(state LIKE '%lock%')"
    "  FROM information_schema.processlist"
    " WHERE db = DATABASE() AND id <> CONNECTION_ID()"
)


# -- a connection Django opened -----------------------------------------------------------------
# Django's MySQL backend opens the connection (mysqlclient) and sets it up itself: utf8mb4 and
# READ COMMITTED by default, and whatever DATABASES[...]["OPTIONS"] says. hookinbox changes
# nothing on it (the session is Django's, and Django's pool hands it out again and again), so
# the borrowed dialect checks once, at an engine's first connection, that Django's settings are
# ones hookinbox can run on, and refuses the others in one line. The session's time zone is
# left as Django has it: hookinbox's times are DATETIME(6) written and read as naive UTC by
# Python, and the server's clock is read with UTC_TIMESTAMP(): no statement depends on it.

ISOLATION = "READ COMMITTED"


class BorrowedMySQLDialect(OwnsNoTransactions, MySQLDialect_mysqldb):
    """SQLAlchemy's mysqlclient dialect on a connection whose transactions Django runs."""

    supports_statement_cache = True

    def initialize(self, connection: Connection) -> None:
        super().initialize(connection)
        version, connection_set, database_set, database, packet = connection.exec_driver_sql(
            "SELECT VERSION(), @@character_set_connection, @@character_set_database,"
            " DATABASE(), @@max_allowed_packet"
        ).one()
        if connection_set != REQUIRED_CHARSET:
            raise ConfigurationError(
                f"Django's MySQL connection speaks {connection_set}; hookinbox needs "
                f"{REQUIRED_CHARSET}: leave DATABASES[...]['OPTIONS']['charset'] out (Django's "
                f"default) or set it to '{REQUIRED_CHARSET}'"
            )
        check_server(str(version), str(connection_set), str(database_set), database, packet)
        setattr(self, _PACKET, int(packet))  # each checkout is a new pool record: kept here
        driver_connection = connection.connection.dbapi_connection
        assert driver_connection is not None  # the first connection, just opened
        isolation = self.get_isolation_level(driver_connection)
        if isolation != ISOLATION:
            # hookinbox's own engine runs READ COMMITTED only: REPEATABLE READ's gap locks make
            # concurrent deliveries wait for each other and deadlock (docs/storage.md).
            raise ConfigurationError(
                f"Django's MySQL connection runs {isolation}; hookinbox needs {ISOLATION}: "
                "leave DATABASES[...]['OPTIONS']['isolation_level'] out (Django's default) or "
                "set it to 'read committed'"
            )

    @classmethod
    def engine_created(cls, engine: Engine) -> None:
        event.listen(engine, "handle_error", _classify)


def _classify(context: ExceptionContext) -> None:
    """What an error means to hookinbox, on its own engine and on Django's connection alike.

    A write refused because the server is read-only (a replica reached after a failover) is a
    lost connection: 503 and a new session (Django's store closes Django's), not a bug (500).
    A deadlock: InnoDB chose this transaction as the victim and rolled it back whole, so the
    error is marked (a transaction of hookinbox's own may run again at once:
    `Store.retry_deadlocks`; on Django's connection only outside the application's `atomic()`)
    and the transaction aborted (a handler's may not commit what followed: `refuse_aborted`;
    each checkout of the borrowed engine is a new pool record, so nothing is left over from
    an earlier transaction). A duplicate key is named for `business_key=`."""
    code = _code(context.original_exception)
    if code in (ER_OPTION_PREVENTS_STATEMENT, ER_READ_ONLY_MODE):
        context.is_disconnect = True
    elif code == ER_LOCK_DEADLOCK:
        mark_deadlock(context.original_exception)
        if context.connection is not None:
            with contextlib.suppress(Exception):
                context.connection.connection.info[_ABORTED] = True
    elif code == ER_DUP_ENTRY and context.connection is not None:
        _name_the_key(context)


registry.register(f"mysql.{BORROWED}", __name__, "BorrowedMySQLDialect")
