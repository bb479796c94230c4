"""One object per database: everything that differs between SQLite and PostgreSQL.

The rest of the storage package (and every layer above it) asks its store's `Dialect` instead
of comparing database names: how to build the engine, which insert has `ON CONFLICT`, how a
batch of deliveries is written, how a JSON path is read, how workers are woken, how busy the
database is, what space a prune frees, what a readiness probe writes. A database hookinbox does
not know is refused at start-up, in one line, by `dialect_named` (through `parse_url` or a
store built on an engine of its own, as Django's is).

Each database is one module (`_sqlite.py`, `_postgres.py`); these are the only modules that
import `sqlalchemy.dialects.*` (a contract in pyproject.toml) or compare a database's name.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import quote

import sqlalchemy as sa
from sqlalchemy import Connection, Engine
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from hookinbox._errors import ConfigurationError

Upsert = postgresql.Insert | sqlite.Insert
"""An INSERT with `ON CONFLICT` (`on_conflict_do_update`, `on_conflict_do_nothing`)."""

if TYPE_CHECKING:
    from alembic.operations import Operations

    from hookinbox._model import NewDelivery
    from hookinbox._storage._batch import Group, Row
    from hookinbox._storage._options import StoreOptions
    from hookinbox._storage._pressure import Pressure
    from hookinbox._storage._search import PayloadMatch
    from hookinbox._storage._store import Store


class Dialect(ABC):
    """What one database does its own way. Stateless: one instance per database."""

    name: ClassVar[str]
    """SQLAlchemy's name for the database (the `db.system.name` of a span)."""
    single_writer: ClassVar[bool]
    """One writer at a time (SQLite's write lock): a process queues its writers, a poller reads
    before it leases, and group commit has one writer thread."""
    listens: ClassVar[bool]
    """Workers on any host are woken by the database itself (PostgreSQL's LISTEN/NOTIFY)."""
    autocommit_batches: ClassVar[bool]
    """Group commit's batch is one atomic statement, run without a transaction around it."""
    prune_busy_batch_seconds: ClassVar[float]
    """How long one prune batch may hold its locks while other work waits (`_pacing.py`)."""
    django_vendors: ClassVar[tuple[str, ...]] = ()
    """The `connection.vendor` of Django backends this database serves."""

    # -- engines and URLs -------------------------------------------------------------------

    @abstractmethod
    def normalize_url(self, url: URL) -> URL:
        """Pick hookinbox's driver; refuse what hookinbox cannot use, in one line."""

    @abstractmethod
    def build_engine(self, url: URL, options: StoreOptions) -> Engine: ...

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

    @abstractmethod
    def scratch_database(self, url: URL) -> AbstractContextManager[str]:
        """A throwaway, empty database reached through `url`, removed afterwards."""

    # -- transactions -----------------------------------------------------------------------

    @abstractmethod
    def housekeeping(self, store: Store) -> AbstractContextManager[Connection]:
        """A transaction whose commit need not be durable on its own (the pruner's)."""

    @abstractmethod
    def refuse_aborted(self, connection: Connection) -> None:
        """Raise if an earlier statement aborted the transaction (so a commit would roll back)."""

    @abstractmethod
    def check_writable(self, connection: Connection) -> None:
        """Raise `StoreUnavailable` if the server will refuse writes (readiness)."""

    @abstractmethod
    def lock_for_migration(self, connection: Connection) -> None:
        """Serialise concurrent migrations inside `connection`'s transaction."""

    # -- statements -------------------------------------------------------------------------

    @abstractmethod
    def insert(self, table: sa.Table) -> Upsert:
        """An INSERT with `on_conflict_do_update` / `on_conflict_do_nothing`."""

    @abstractmethod
    def write_batch(
        self, connection: Connection, deliveries: Sequence[NewDelivery], groups: list[Group]
    ) -> dict[tuple[str, str], Row]:
        """One statement's worth of a group-commit batch (`_batch.py` folds and orders it)."""

    @abstractmethod
    def payload_value(self, match: PayloadMatch) -> sa.ColumnElement[Any]:
        """The text at `match.path` in an event's JSON body, NULL when there is none."""

    @abstractmethod
    def time_bucket(
        self, column: sa.ColumnElement[Any], start: datetime, width: timedelta
    ) -> sa.ColumnElement[Any]:
        """The index (0, 1, ...) of the `width`-wide bucket from `start` that `column` is in."""

    @abstractmethod
    def notify(self, connection: Connection, channel: str) -> None:
        """Wake the workers listening on `channel` when this transaction commits."""

    # -- the database's own state -----------------------------------------------------------

    @abstractmethod
    def pressure_mark(self, connection: Connection) -> object:
        """Where a window of `pressure_since` starts (`_pressure.py`)."""

    @abstractmethod
    def pressure_since(self, connection: Connection, mark: object) -> Pressure:
        """Other work on the database since `mark`."""

    @abstractmethod
    def checkpoint_passive(self, store: Store) -> None:
        """Fold the write-ahead log back without waiting for anyone (where that is ours)."""

    @abstractmethod
    def free_pages(self, store: Store) -> int:
        """Pages the database holds but no table uses, where they can be given back."""

    @abstractmethod
    def give_back_pages(self, store: Store, pages: int) -> int:
        """Return up to `pages` free pages to the file system; how many were returned."""

    # -- migrations -------------------------------------------------------------------------

    @abstractmethod
    def create_notify_trigger(
        self, op: Operations, table: str, channel: str, function: str
    ) -> None:
        """Notify `channel` (from the trigger function `function`) when a row is inserted
        into `table`, where the database `listens`."""

    # -- Django's connections ---------------------------------------------------------------

    @abstractmethod
    def borrowed_url(self, settings: Mapping[str, Any]) -> URL:
        """The URL of an engine over a connection another framework opened (Django's
        `settings_dict`): hookinbox's statements on it, that framework's transactions."""


# The registry, filled in below: SQLAlchemy's dialect name (and aliases) -> the dialect.
_DIALECTS: dict[str, Dialect] = {}


def _register(dialect: Dialect, *aliases: str) -> None:
    for name in (dialect.name, *aliases):
        _DIALECTS[name] = dialect


def dialect_named(name: str) -> Dialect:
    """The dialect SQLAlchemy calls `name`; an unknown database is refused in one line."""
    dialect = _DIALECTS.get(name)
    if dialect is None:
        raise ConfigurationError(f"unsupported database {name!r}: use sqlite:/// or postgresql://")
    return dialect


def dialect_of(engine: Engine) -> Dialect:
    return dialect_named(engine.dialect.name)


def dialect_for_django(connection: Any) -> Dialect:
    """The dialect of a Django connection's backend; others refused in one line."""
    vendor = connection.vendor
    for dialect in _DIALECTS.values():
        if vendor in dialect.django_vendors:
            return dialect
    raise ConfigurationError(
        f"Django's {vendor!r} backend is not supported: hookinbox supports "
        "django.db.backends.sqlite3 and django.db.backends.postgresql"
    )


def dialects() -> Iterator[Dialect]:
    """Every known dialect, once each."""
    seen: set[int] = set()
    for dialect in _DIALECTS.values():
        if id(dialect) not in seen:
            seen.add(id(dialect))
            yield dialect


def parse_url(url: str | URL) -> URL:
    """Accept the usual spellings and pick hookinbox's drivers (`postgresql://` means
    psycopg 3); an unknown database or a malformed URL is refused in one line."""
    try:
        parsed = make_url(_hosts_to_query(url) if isinstance(url, str) else url)
    except (ArgumentError, ValueError) as exc:  # ValueError: a port that is not a number
        raise ConfigurationError(f"not a database URL: {_without_password(url)!r}") from exc
    return dialect_named(parsed.get_backend_name()).normalize_url(parsed)


def dialect_for_url(url: str | URL) -> Dialect:
    return dialect_named(parse_url(url).get_backend_name())


def build_engine(url: str | URL, options: StoreOptions) -> Engine:
    parsed = parse_url(url)
    return dialect_named(parsed.get_backend_name()).build_engine(parsed, options)


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


def _load() -> None:
    from hookinbox._storage._dialects._postgres import PostgreSQL
    from hookinbox._storage._dialects._sqlite import SQLite

    _register(SQLite())
    _register(PostgreSQL(), "postgres")


_load()
