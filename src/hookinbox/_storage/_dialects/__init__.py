"""One object per database: everything that differs between SQLite, PostgreSQL and MariaDB.

The rest of the storage package (and every layer above it) asks its store's `Dialect` instead
of comparing database names: how to build the engine, which insert has `ON CONFLICT`, how a
batch of deliveries is written, how a JSON path is read, how workers are woken, how busy the
database is, what space a prune frees, what a readiness probe writes. A database hookinbox does
not know is refused at start-up, in one line, by `dialect_named` (through `parse_url` or a
store built on an engine of its own, as Django's is).

Each database is one package (`_sqlite/`, `_postgres/`, `_mysql/`), one concern a module: the
engine and sessions, the statements, the database's own state, the migrations' DDL, its
driver's errors, Django's connections; these are the only modules that import
`sqlalchemy.dialects.*` (a contract in pyproject.toml) or compare a database's name. Another
database plugs in with `register` (a test's fixture dialect does: tests/storage/fourth_dialect/).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from sqlalchemy import Connection, Engine
from sqlalchemy.engine import URL, make_url
from sqlalchemy.engine.interfaces import Dialect as SQLAlchemyDialect
from sqlalchemy.exc import ArgumentError

from hookinbox._errors import ConfigurationError
from hookinbox._storage._dialects._base import Dialect, Upsert
from hookinbox._storage._dialects._mysql import MySQL
from hookinbox._storage._dialects._postgres import PostgreSQL
from hookinbox._storage._dialects._sqlite import SQLite
from hookinbox._storage._errors import read_errors_of

if TYPE_CHECKING:
    from hookinbox._storage._options import StoreOptions

__all__ = [
    "Dialect",
    "Upsert",
    "async_url",
    "build_engine",
    "dialect_for_django",
    "dialect_for_url",
    "dialect_named",
    "dialect_of",
    "dialects",
    "parse_url",
    "register",
]

# The registry, filled in below: SQLAlchemy's dialect name (and aliases) -> the dialect.
_DIALECTS: dict[str, Dialect] = {}

SERVED_BY = "hookinbox_dialect"
"""A SQLAlchemy dialect class that sets this attribute is served by the hookinbox dialect of
that name (a variant of a database SQLAlchemy knows, keeping SQLAlchemy's name for it so that
its compiler, alembic and the tables' variants still apply); any other by the one registered
under SQLAlchemy's name."""


def register(dialect: Dialect, *aliases: str) -> None:
    """Make `dialect` known by its name and `aliases` (the URL schemes it takes), and its
    driver's errors read (`_errors.py`): hookinbox's three below, or one plugged in by an
    application or a test (docs/development.md, "Adding a database")."""
    for name in (dialect.name, *aliases):
        _DIALECTS[name] = dialect
    read_errors_of(dialect.errors)


def dialect_named(name: str) -> Dialect:
    """The dialect SQLAlchemy calls `name`; an unknown database is refused in one line."""
    dialect = _DIALECTS.get(name)
    if dialect is None:
        raise ConfigurationError(
            f"unsupported database {name!r}: use sqlite:///, postgresql:// or mysql://"
        )
    return dialect


def dialect_of(bind: Engine | Connection | SQLAlchemyDialect) -> Dialect:
    """The dialect that serves an engine, a connection or SQLAlchemy's dialect of either."""
    driver = bind.dialect if isinstance(bind, Engine | Connection) else bind
    return dialect_named(getattr(driver, SERVED_BY, None) or driver.name)


def dialect_for_django(connection: Any) -> Dialect:
    """The dialect of a Django connection's backend; others refused in one line."""
    vendor = connection.vendor
    for dialect in _DIALECTS.values():
        if vendor in dialect.django_vendors:
            return dialect
    raise ConfigurationError(
        f"Django's {vendor!r} backend is not supported: hookinbox supports "
        "django.db.backends.sqlite3, django.db.backends.postgresql and "
        "django.db.backends.mysql (MariaDB)"
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


def async_url(url: str | URL) -> URL | None:
    """The URL the async worker opens when `url` names an async driver (checked installed),
    else None; the sync work on such a URL uses `parse_url`'s."""
    try:
        parsed = make_url(_hosts_to_query(url) if isinstance(url, str) else url)
    except (ArgumentError, ValueError) as exc:
        raise ConfigurationError(f"not a database URL: {_without_password(url)!r}") from exc
    return dialect_named(parsed.get_backend_name()).async_url(parsed)


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


register(SQLite())
register(PostgreSQL(), "postgres")
register(MySQL(), "mariadb")
