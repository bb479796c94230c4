"""The questions the storage seam asks every database (`Dialect`); answered once per database
in its own package (`_sqlite/`, `_postgres/`, `_mysql/`)."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar, Self

import sqlalchemy as sa
from sqlalchemy import Connection, Engine
from sqlalchemy.engine import URL

from hookinbox._errors import ConfigurationError
from hookinbox._payload import search_text
from hookinbox._storage._errors import ErrorReader, ReadsNothing

if TYPE_CHECKING:
    from alembic.operations import Operations
    from sqlalchemy.ext.asyncio import AsyncEngine

    from hookinbox._model import NewDelivery
    from hookinbox._records import PayloadMatch, Pressure
    from hookinbox._storage._batch import Group, Row
    from hookinbox._storage._options import StoreOptions
    from hookinbox._storage._transactions import Transactions


class ListenLost(Exception):
    """The connection a listener waits on for notifications failed or was lost (its cause is
    the driver's error): the listener polls, and tries again after a pause."""


class Upsert(sa.Insert):
    """An INSERT that says what a conflict on a unique key does, in PostgreSQL's and SQLite's
    words: `on_conflict_do_update` (the proposed row is `excluded`), `on_conflict_do_nothing`.

    Each dialect's `insert` returns a subclass of its own: SQLAlchemy's insert of that
    database with these methods, or (a database that words the conflict otherwise, as
    MariaDB's `ON DUPLICATE KEY UPDATE`) one that translates them, in its own module."""

    inherit_cache = True

    @property
    def excluded(self) -> Any:
        """The row the INSERT proposed, whose columns an update may read."""
        raise NotImplementedError

    def on_conflict_do_update(
        self,
        *,
        index_elements: Sequence[Any] = (),
        set_: Mapping[str, Any],
        where: sa.ColumnElement[bool] | None = None,
    ) -> Self:
        """On a conflict of `index_elements`' unique key, set `set_` (where `where` holds)."""
        raise NotImplementedError

    def on_conflict_do_nothing(self, *, index_elements: Sequence[Any] = ()) -> Self:
        """On a conflict of `index_elements`' unique key, insert nothing (no row returned)."""
        raise NotImplementedError


class Dialect(ABC):
    """What one database does its own way. Stateless: one instance per database."""

    name: ClassVar[str]
    """SQLAlchemy's name for the database (the `db.system.name` of a span)."""
    single_writer: ClassVar[bool]
    """One writer at a time (SQLite's write lock): a process queues its writers, a poller reads
    before it leases, and group commit has one writer thread."""
    listens: ClassVar[bool]
    """Workers on any host are woken by the database itself (PostgreSQL's LISTEN/NOTIFY)."""
    returns_joined_rows: ClassVar[bool]
    """A data-modifying statement can feed another in one statement (a CTE) and return the
    other table's columns: a lease or a claim is one round trip (PostgreSQL)."""
    autocommit_batches: ClassVar[bool]
    """Group commit's batch is one atomic statement, run without a transaction around it."""
    prune_busy_batch_seconds: ClassVar[float]
    """How long one prune batch may hold its locks while other work waits (`_pacing.py`)."""
    django_vendors: ClassVar[tuple[str, ...]] = ()
    """The `connection.vendor` of Django backends this database serves."""
    async_drivers: ClassVar[Mapping[str, str]] = {}
    """The async drivers the async worker runs on (SQLAlchemy's driver name -> the extra that
    installs it); `normalize_url` turns each into the sync driver of hookinbox's own work."""
    errors: ClassVar[ErrorReader] = ReadsNothing()
    """What its driver's errors mean, read where they are caught (`_errors.py` asks every
    registered dialect's in turn): on every engine, a framework's too."""

    # -- engines and URLs -------------------------------------------------------------------

    @abstractmethod
    def normalize_url(self, url: URL) -> URL:
        """Pick hookinbox's driver; refuse what hookinbox cannot use, in one line."""

    @abstractmethod
    def build_engine(self, url: URL, options: StoreOptions) -> Engine: ...

    def async_url(self, url: URL) -> URL | None:
        """`url` (as given, not normalized) when it names one of `async_drivers`, checked
        installed; None when it names a sync driver."""
        driver = url.drivername.partition("+")[2]  # the name given (`postgres://` loads none)
        if driver not in self.async_drivers:
            return None
        from hookinbox._extras import require

        require(f"a {url.drivername}:// database URL", self.async_drivers[driver])
        return url

    def build_async_engine(self, url: URL, options: StoreOptions) -> AsyncEngine:
        """The async worker's engine on `url` (one `async_url` returned)."""
        raise ConfigurationError(f"hookinbox has no async driver for {self.name}")

    @abstractmethod
    def missing_database(self, url: URL) -> str | None:
        """Why an operator command must not open `url` (a database that does not exist and
        would be created empty), or None."""
        return None

    @abstractmethod
    def read_only_engine(self, url: URL) -> Engine:
        """An engine that can only read (`simulate --verify` on a user's database)."""

    @abstractmethod
    def listen_params(self, engine: Engine, options: StoreOptions) -> dict[str, Any]:
        """The connection parameters of a listener outside the pool (`listens` only)."""

    def listen(
        self,
        params: Mapping[str, Any],
        channels: Sequence[str],
        *,
        setup_timeout: float,
        listening: Callable[[], None],
        notified: Callable[[str], None],
        stopping: threading.Event,
    ) -> None:
        """Wait for the database's notifications on `channels` over a connection of its own
        (`listen_params`), until `stopping` is set: `listening()` once the channels are
        listened to (within `setup_timeout` seconds), then `notified(channel)` for each.
        `ListenLost` when the connection fails or is lost (`listens` only)."""
        raise ConfigurationError(f"{self.name} has no LISTEN: its workers poll")

    @abstractmethod
    def scratch_database(self, url: URL) -> AbstractContextManager[str]:
        """A throwaway, empty database reached through `url`, removed afterwards."""

    # -- transactions -----------------------------------------------------------------------

    def housekeeping(self, store: Transactions) -> AbstractContextManager[Connection]:
        """A transaction whose commit need not be durable on its own (the pruner's): an
        ordinary one, unless the database can commit more cheaply without an fsync
        (SQLite)."""
        return store.transaction()

    @abstractmethod
    def refuse_aborted(self, connection: Connection) -> None:
        """Raise if an earlier statement aborted the transaction (so a commit would roll back)."""

    @abstractmethod
    def check_writable(self, connection: Connection) -> None:
        """Raise `StoreUnavailable` if the server will refuse writes (readiness)."""

    @abstractmethod
    def limit_statements(
        self, connection: Connection, seconds: float, *, local: bool = False
    ) -> None:
        """Cancel a statement of `connection` (of its transaction only, with `local`) that runs
        longer than `seconds`, where the database can (a statement stuck behind a row lock)."""

    @abstractmethod
    def lock_for_migration(self, connection: Connection) -> None:
        """Serialise concurrent migrations inside `connection`'s transaction."""

    @abstractmethod
    def limit_lock_waits(self, connection: Connection, seconds: float) -> None:
        """Within `connection`'s transaction, give up a lock wait after `seconds` where the
        database can, the error then being `gave_up_waiting`'s (`_lock_waits.py`)."""

    def gave_up_waiting(self, error: BaseException) -> bool:
        """True when `error` is a lock wait that `limit_lock_waits` ended."""
        return False

    @abstractmethod
    def lock_for_copy(self, connection: Connection) -> None:
        """Inside one short transaction of schema 9's copy (`_queue_copy.py`), on a connection
        that took `lock_for_migration` before: keep a migration's step from running meanwhile;
        other copies, and the start of a process of an older version, wait for one batch at
        most."""

    # -- statements -------------------------------------------------------------------------

    @abstractmethod
    def insert(self, table: sa.TableClause) -> Upsert:
        """An INSERT with `on_conflict_do_update` / `on_conflict_do_nothing`."""

    @abstractmethod
    def write_batch(
        self, connection: Connection, deliveries: Sequence[NewDelivery], groups: list[Group]
    ) -> dict[tuple[str, str], Row]:
        """One statement's worth of a group-commit batch (`_batch.py` folds and orders it)."""

    @abstractmethod
    def payload_value(self, match: PayloadMatch, *, careful: bool = False) -> sa.ColumnElement[Any]:
        """The text at `match.path` in an event's JSON body, NULL when there is none. Where a
        stored body can fail the statement (PostgreSQL's jsonb cast: `DataError`), `careful`
        checks each body first and reads none it cannot (slower: the retry of a failed
        search)."""

    @abstractmethod
    def check_row_size(self, connection: Connection, delivery: NewDelivery) -> None:
        """Raise `BodyTooLarge` if the database cannot take `delivery`'s row in a statement
        of its own on `connection` (MariaDB's `max_allowed_packet`); most can."""

    @abstractmethod
    def check_body_limit(self, store: Transactions, max_body_size: int) -> None:
        """Raise `ConfigurationError` if a body of `max_body_size` bytes cannot be stored in
        one statement (MariaDB's `max_allowed_packet`), asking the database where it must;
        `StoreUnavailable` if it cannot be asked now."""

    def payload_unsure(self, match: PayloadMatch) -> sa.ColumnElement[bool] | None:
        """True for a body that `payload_value` may read otherwise than a handler does (the
        database's JSON functions keep the first value of a key an object repeats, Python's
        parser the last): the search decides those in Python, with `payload_text`. None
        where `payload_value` reads every body as handlers do."""
        return None

    def payload_text(self, body: bytes, match: PayloadMatch) -> str | None:
        """What `payload_value` reads at `match.path` in `body`, keeping the last value of a
        repeated key, as handlers do (for the bodies `payload_unsure` finds)."""
        return search_text(body, match.path)

    @abstractmethod
    def time_bucket(
        self, column: sa.ColumnElement[Any], start: datetime, width: timedelta
    ) -> sa.ColumnElement[Any]:
        """The index (0, 1, ...) of the `width`-wide bucket from `start` that `column` is in."""

    @abstractmethod
    def notify(self, connection: Connection, channel: str) -> None:
        """Wake the workers listening on `channel` when this transaction commits."""

    def read_through(self, query: sa.Select[Any], table: sa.Table, index: str) -> sa.Select[Any]:
        """`query`, made to read `table` through `index` where the planner could choose a
        worse one (a read in an index's order that must not sort the whole table); as it is
        where the planner chooses well by itself."""
        return query

    # -- the database's own state -----------------------------------------------------------

    @abstractmethod
    def now(self, connection: Connection) -> datetime:
        """The time by the database's clock, for what every process must agree on (the
        workers' heartbeats), whatever each host's clock says."""

    @abstractmethod
    def pressure_mark(self, connection: Connection) -> object:
        """Where a window of `pressure_since` starts (`_pressure.py`)."""

    @abstractmethod
    def pressure_since(self, connection: Connection, mark: object) -> Pressure:
        """Other work on the database since `mark`."""

    @abstractmethod
    def checkpoint_passive(self, store: Transactions) -> None:
        """Fold the write-ahead log back without waiting for anyone (where that is ours)."""

    @abstractmethod
    def free_pages(self, store: Transactions) -> int:
        """Pages the database holds but no table uses, where they can be given back."""

    @abstractmethod
    def give_back_pages(self, store: Transactions, pages: int) -> int:
        """Return up to `pages` free pages to the file system; how many were returned."""

    # -- migrations -------------------------------------------------------------------------

    @abstractmethod
    def create_notify_trigger(
        self, op: Operations, table: str, channel: str, function: str
    ) -> None:
        """Notify `channel` (from the trigger function `function`) when a row is inserted
        into `table`, where the database `listens`."""

    @abstractmethod
    def lock_tables(self, op: Operations, *tables: str) -> None:
        """Hold `tables` against other writers for the rest of the migration's transaction."""

    @abstractmethod
    def set_fill_factor(self, op: Operations, table: str, percent: int) -> None:
        """How full inserts leave a table's pages (room for a row's next versions)."""

    def create_index_if_missing(
        self, op: Operations, name: str, table: str, columns: str, where: str
    ) -> None:
        """Create index `name` on `columns` of `table`, partial (`where`) where the database
        has partial indexes, unless it exists."""
        op.execute(f"CREATE INDEX IF NOT EXISTS {name} ON {table} ({columns}) WHERE {where}")

    def drop_index_if_exists(self, op: Operations, table: str, name: str) -> None:
        op.execute(f"DROP INDEX IF EXISTS {name}")

    @abstractmethod
    def queue_new_events(self, op: Operations) -> None:
        """A trigger that gives every event inserted unfinished its queue row (and wakes
        the workers), whoever inserts it; nothing when it exists."""

    @abstractmethod
    def mirror_queue_changes(self, op: Operations) -> None:
        """Triggers, unless they exist, that carry every later change of an event into its
        queue row while schema 9's copy runs (`_queue_copy.py`): an event left open by an
        update of its status, schedule or attempts gets its row as the event now is (a held
        one `pending`, as the copy makes it); an event closed (processed, unhandled) or
        deleted while open gets a tombstone (state `done`), never no row, so that a copy
        reading the event as it was before cannot bring it back."""

    @abstractmethod
    def stop_mirroring_queue(self, op: Operations) -> None:
        """Drop `mirror_queue_changes`' triggers (and functions), where they exist."""

    @abstractmethod
    def refuse_old_leases(self, op: Operations) -> None:
        """Triggers that refuse the leases of an older hookinbox (schema 8 and before):
        `hookinbox_events.lease_token` set, or an outbox message made `delivering`."""

    @abstractmethod
    def copy_new_payloads(self, op: Operations) -> None:
        """A trigger, unless it exists, that copies the body and headers of every event
        inserted into `hookinbox_payloads` (unless it has the event's row) while schema 14's
        copy runs (`_payload_copy.py`), so that what older processes store meanwhile needs no
        copying under the step's lock."""

    @abstractmethod
    def drop_payload_columns(self, op: Operations) -> None:
        """Schema 14's end: `hookinbox_events` without `body` and `headers`, and without
        `copy_new_payloads`' trigger (each in the order the database allows, so that no
        insert meanwhile leaves an event without its payload)."""

    @abstractmethod
    def queue_new_messages(self, op: Operations) -> None:
        """A trigger that gives every outbox message inserted `pending` its row in
        `hookinbox_outbox_queue` (schema 15), whoever inserts it; nothing when it exists."""

    @abstractmethod
    def refuse_old_relays(self, op: Operations) -> None:
        """A trigger that refuses the lease of a relay older than schema 15: a token written
        to `hookinbox_outbox.lease_token` (the queue table holds the leases since)."""

    def add_column_with_default(
        self, op: Operations, table: str, column: sa.Column[Any], default: str
    ) -> None:
        """Add `column` to `table`, every existing row holding the constant `default`, without
        rewriting the table where the database allows (a catalog change: PostgreSQL 11+,
        SQLite; a database that needs a clause for it, such as MySQL's `ALGORITHM=INSTANT`,
        says so in its own dialect)."""
        column.server_default = sa.DefaultClause(default)
        op.add_column(table, column)

    # -- Django's connections ---------------------------------------------------------------

    @abstractmethod
    def borrowed_url(self, settings: Mapping[str, Any]) -> URL:
        """The URL of an engine over a connection another framework opened (Django's
        `settings_dict`): hookinbox's statements on it, that framework's transactions."""
