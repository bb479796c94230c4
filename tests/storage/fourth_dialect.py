"""A fourth database, written as a test fixture: SQLite under a URL scheme of its own.

It proves that a database plugs in from outside hookinbox's source: a SQLAlchemy dialect
registered under its scheme (`sqlitefixture://`), naming the hookinbox dialect that serves it,
and that hookinbox dialect, assembled from the SQLite package's concerns and registered with
`register`. Nothing in src/ names it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from sqlalchemy.dialects import registry
from sqlalchemy.dialects.sqlite.pysqlite import SQLiteDialect_pysqlite
from sqlalchemy.engine import URL

from hookinbox._errors import ConfigurationError
from hookinbox._storage._dialects import SERVED_BY, register
from hookinbox._storage._dialects._sqlite import SQLite
from hookinbox._storage._dialects._sqlite._ddl import SQLiteMigrations
from hookinbox._storage._dialects._sqlite._engine import SQLiteEngines
from hookinbox._storage._dialects._sqlite._state import SQLiteState
from hookinbox._storage._dialects._sqlite._statements import SQLiteStatements
from hookinbox._storage._errors import ErrorReader

SCHEME = "sqlitefixture"
NAME = "sqlite_fixture"


class FixtureDriver(SQLiteDialect_pysqlite):
    """SQLAlchemy's sqlite3 dialect under the scheme `sqlitefixture://`. Its name stays
    SQLAlchemy's `sqlite` (its compiler, alembic's SQLite rules and the tables' variants
    apply); `SERVED_BY` names the hookinbox dialect that serves it."""

    supports_statement_cache = True


setattr(FixtureDriver, SERVED_BY, NAME)


class FourthDialect(SQLiteEngines, SQLiteStatements, SQLiteState, SQLiteMigrations):
    """SQLite's answers, taken concern by concern, under a name and a scheme of its own."""

    name: ClassVar[str] = NAME
    single_writer: ClassVar[bool] = True
    listens: ClassVar[bool] = False
    returns_joined_rows: ClassVar[bool] = False
    autocommit_batches: ClassVar[bool] = False
    prune_busy_batch_seconds: ClassVar[float] = 0.005
    errors: ClassVar[ErrorReader] = SQLite.errors  # sqlite3's errors, read once

    def normalize_url(self, url: URL) -> URL:
        if not url.database:
            raise ConfigurationError(f"{SCHEME}:// needs a file: {SCHEME}:///path.db")
        return url.set(drivername=SCHEME)

    def borrowed_url(self, settings: Mapping[str, Any]) -> URL:
        raise ConfigurationError(f"{NAME} serves no Django backend")


def install() -> FourthDialect:
    """Register the fixture with SQLAlchemy (its scheme) and with hookinbox (its name)."""
    registry.register(SCHEME, __name__, "FixtureDriver")
    dialect = FourthDialect()
    register(dialect, SCHEME)
    return dialect
