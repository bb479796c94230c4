"""A connection Django opened: SQLAlchemy's SQLite dialect on it, hookinbox's URL for it."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy.dialects import registry
from sqlalchemy.dialects.sqlite import DATETIME
from sqlalchemy.dialects.sqlite.pysqlite import SQLiteDialect_pysqlite
from sqlalchemy.engine import URL
from sqlalchemy.engine.interfaces import Dialect as SQLAlchemyDialect
from sqlalchemy.types import DateTime

from hookinbox._storage._dialects._base import Dialect
from hookinbox._storage._dialects._borrowed import DRIVER, OwnsNoTransactions
from hookinbox._storage._dialects._sqlite._engine import HintedCompiler


class SQLiteBorrowed(Dialect):
    """The part of the dialect that answers for Django's connections."""

    def borrowed_url(self, settings: Mapping[str, Any]) -> URL:
        return URL.create(f"sqlite+{DRIVER}", database=str(settings["NAME"]))


# -- a connection Django opened -----------------------------------------------------------------


class _ConvertedDateTime(DATETIME):
    """Django's SQLite connections parse DATETIME columns themselves (detect_types): pass
    the datetime they return through, parse text as SQLAlchemy would."""

    def result_processor(self, dialect: SQLAlchemyDialect, coltype: object) -> Any:
        parse = super().result_processor(dialect, coltype)

        def process(value: Any) -> Any:
            if value is None or isinstance(value, datetime) or parse is None:
                return value
            return parse(value)

        return process


class BorrowedSQLiteDialect(OwnsNoTransactions, SQLiteDialect_pysqlite):
    """SQLAlchemy's SQLite dialect on a connection whose transactions another framework runs."""

    supports_statement_cache = True  # SQLAlchemy reads it from each dialect class itself
    colspecs = {**SQLiteDialect_pysqlite.colspecs, DateTime: _ConvertedDateTime}  # noqa: RUF012
    statement_compiler = HintedCompiler


registry.register(f"sqlite.{DRIVER}", __name__, "BorrowedSQLiteDialect")
