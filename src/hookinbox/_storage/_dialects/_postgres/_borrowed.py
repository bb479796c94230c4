"""A connection Django opened: SQLAlchemy's psycopg dialect on it, hookinbox's URL for it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy.dialects import registry
from sqlalchemy.dialects.postgresql.psycopg import PGDialect_psycopg
from sqlalchemy.engine import URL

from hookinbox._storage._dialects._base import Dialect
from hookinbox._storage._dialects._borrowed import DRIVER, OwnsNoTransactions

# Django's own OPTIONS for PostgreSQL; the rest are libpq parameters the LISTEN connection needs.
_DJANGO_OPTIONS = frozenset(
    {"isolation_level", "server_side_binding", "pool", "assume_role", "cursor_factory"}
)


class PostgresBorrowed(Dialect):
    def borrowed_url(self, settings: Mapping[str, Any]) -> URL:
        options = {
            key: str(value)
            for key, value in (settings.get("OPTIONS") or {}).items()
            if key not in _DJANGO_OPTIONS
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


# -- a connection Django opened -----------------------------------------------------------------


class BorrowedPostgresDialect(OwnsNoTransactions, PGDialect_psycopg):
    """SQLAlchemy's psycopg dialect on a connection whose transactions another framework runs."""

    supports_statement_cache = True


registry.register(f"postgresql.{DRIVER}", __name__, "BorrowedPostgresDialect")
