"""PostgreSQL (psycopg 3): a pooled server, concurrent writers, LISTEN/NOTIFY.

The engine sets libpq's TCP timeouts so that a silent server is given up in seconds, refuses a
database not encoded UTF8, and counts a write refused by a read-only server as a lost
connection (a standby reached after a failover: 503, not 500), and marks a deadlock's victim
(40P01) so that a transaction of hookinbox's own runs again (`Store.retry_deadlocks`). Group
commit's batch is ONE
statement (a data-modifying CTE) run in autocommit. Payload search reads the body as JSONB.
Workers are woken by NOTIFY from triggers; the pruner reads `pg_stat_activity` to see who else
is working.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from hookinbox._storage._dialects._postgres._borrowed import PostgresBorrowed
from hookinbox._storage._dialects._postgres._ddl import PostgresMigrations
from hookinbox._storage._dialects._postgres._engine import PostgresEngines
from hookinbox._storage._dialects._postgres._errors import PostgresErrors
from hookinbox._storage._dialects._postgres._state import PostgresState
from hookinbox._storage._dialects._postgres._statements import PostgresStatements
from hookinbox._storage._errors import ErrorReader

__all__ = ["PostgreSQL"]


class PostgreSQL(
    PostgresEngines, PostgresStatements, PostgresState, PostgresMigrations, PostgresBorrowed
):
    """PostgreSQL's answers, one concern a module of this package."""

    name: ClassVar[str] = "postgresql"
    single_writer: ClassVar[bool] = False
    listens: ClassVar[bool] = True
    returns_joined_rows: ClassVar[bool] = True
    autocommit_batches: ClassVar[bool] = True
    prune_busy_batch_seconds: ClassVar[float] = 0.02
    django_vendors: ClassVar[tuple[str, ...]] = ("postgresql",)
    errors: ClassVar[ErrorReader] = PostgresErrors()
    # asyncpg, or psycopg's own async mode; hookinbox's own work stays on psycopg (sync).
    async_drivers: ClassVar[Mapping[str, str]] = {
        "asyncpg": "asyncpg",
        "psycopg_async": "postgres-async",
    }
