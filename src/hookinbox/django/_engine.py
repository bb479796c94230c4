"""An SQLAlchemy engine over Django's own connection, whose transactions Django drives.

hookinbox's queries are SQLAlchemy Core. To put them in the transaction of a handler's Django
ORM writes, they must run on the very DB-API connection Django uses in that thread, and commit
or roll back when `transaction.atomic()` says so. Hence:

- a pool without a pool (NullPool) whose `creator` returns the calling thread's Django
  connection: each checkout gets whatever connection Django holds now, even after Django
  closed and reopened it between requests;
- dialects whose commit, rollback and close do nothing: Django's `atomic()` begins and ends
  the transaction, Django closes its connections. Savepoints are plain SQL and still work;
- no per-connection setup from SQLAlchemy (`on_connect`): with a new pooled record on every
  checkout it would run again and again on the same Django connection.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.db import DatabaseError, connections
from sqlalchemy import Engine, create_engine
from sqlalchemy.dialects import registry
from sqlalchemy.dialects.postgresql.psycopg import PGDialect_psycopg
from sqlalchemy.dialects.sqlite import DATETIME
from sqlalchemy.dialects.sqlite.pysqlite import SQLiteDialect_pysqlite
from sqlalchemy.engine import URL
from sqlalchemy.engine.interfaces import DBAPIConnection, Dialect
from sqlalchemy.pool import NullPool
from sqlalchemy.types import DateTime

from hookinbox._errors import ConfigurationError
from hookinbox._storage._engine import HIDE_PARAMETERS

DRIVER = "hookinbox_django"

# Django's own OPTIONS for PostgreSQL; the rest are libpq parameters the LISTEN connection needs.
_DJANGO_POSTGRES_OPTIONS = frozenset(
    {"isolation_level", "server_side_binding", "pool", "assume_role", "cursor_factory"}
)


class _DjangoOwnsTransactions:
    """Statements only: Django's `atomic()` commits and rolls back, Django closes."""

    def do_commit(self, dbapi_connection: DBAPIConnection) -> None:
        pass

    def do_rollback(self, dbapi_connection: DBAPIConnection) -> None:
        pass

    def do_close(self, dbapi_connection: DBAPIConnection) -> None:
        pass

    def on_connect(self) -> Callable[[DBAPIConnection], None]:
        return _no_setup


def _no_setup(_dbapi_connection: DBAPIConnection) -> None:
    pass


class _ConvertedDateTime(DATETIME):
    """Django's SQLite connections parse DATETIME columns themselves (detect_types): pass
    the datetime they return through, parse text as SQLAlchemy would."""

    def result_processor(self, dialect: Dialect, coltype: object) -> Any:
        parse = super().result_processor(dialect, coltype)

        def process(value: Any) -> Any:
            if value is None or isinstance(value, datetime) or parse is None:
                return value
            return parse(value)

        return process


class DjangoSQLiteDialect(_DjangoOwnsTransactions, SQLiteDialect_pysqlite):
    supports_statement_cache = True  # SQLAlchemy reads it from each dialect class itself
    colspecs = {**SQLiteDialect_pysqlite.colspecs, DateTime: _ConvertedDateTime}  # noqa: RUF012


class DjangoPostgresDialect(_DjangoOwnsTransactions, PGDialect_psycopg):
    supports_statement_cache = True


registry.register(f"sqlite.{DRIVER}", __name__, "DjangoSQLiteDialect")
registry.register(f"postgresql.{DRIVER}", __name__, "DjangoPostgresDialect")


def django_url(alias: str) -> URL:
    """The database of Django's `alias` as a URL (the LISTEN connection dials it)."""
    connection = connections[alias]
    settings = connection.settings_dict
    if connection.vendor == "sqlite":
        return URL.create(f"sqlite+{DRIVER}", database=str(settings["NAME"]))
    if connection.vendor == "postgresql":
        options = {
            key: str(value)
            for key, value in (settings.get("OPTIONS") or {}).items()
            if key not in _DJANGO_POSTGRES_OPTIONS
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
    raise ConfigurationError(
        f"Django database {alias!r} uses {connection.vendor!r}: hookinbox supports "
        "django.db.backends.sqlite3 and django.db.backends.postgresql"
    )


def django_engine(alias: str) -> Engine:
    """An engine whose every connection is the calling thread's Django connection `alias`."""

    def creator() -> DBAPIConnection:
        connection = connections[alias]
        try:
            connection.ensure_connection()
        except DatabaseError as error:
            # Django wraps the driver's error; SQLAlchemy recognises (and hookinbox translates)
            # the driver's own, so hand that on: "database down" becomes StoreUnavailable.
            raise (error.__cause__ or error) from None
        raw: DBAPIConnection = connection.connection
        return raw

    return create_engine(
        django_url(alias), creator=creator, poolclass=NullPool, hide_parameters=HIDE_PARAMETERS
    )
