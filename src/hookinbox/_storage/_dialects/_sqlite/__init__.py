"""SQLite: one durable file shared by processes, one writer at a time.

The engine sets WAL and `synchronous` on every connection and begins every writing transaction
with `BEGIN IMMEDIATE`, taken by polling (below) rather than SQLite's busy handler; readers
begin deferred and never queue for the write lock. Group commit's batch is a multi-row
`VALUES` upsert in the caller's transaction (in process: no round trips to save). Payload
search asks `json_valid`, then walks the path with `json_each` (a repeated key's last value).
The pruner's transactions skip the fsync of their commits, and space freed by a prune goes
back to the file system in short writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from hookinbox._storage._dialects._sqlite._borrowed import SQLiteBorrowed
from hookinbox._storage._dialects._sqlite._ddl import SQLiteMigrations
from hookinbox._storage._dialects._sqlite._engine import SQLiteEngines
from hookinbox._storage._dialects._sqlite._errors import SQLiteErrors
from hookinbox._storage._dialects._sqlite._state import SQLiteState
from hookinbox._storage._dialects._sqlite._statements import SQLiteStatements
from hookinbox._storage._errors import ErrorReader

__all__ = ["SQLite"]


class SQLite(SQLiteEngines, SQLiteStatements, SQLiteState, SQLiteMigrations, SQLiteBorrowed):
    """SQLite's answers, one concern a module of this package."""

    name: ClassVar[str] = "sqlite"
    single_writer: ClassVar[bool] = True
    listens: ClassVar[bool] = False
    returns_joined_rows: ClassVar[bool] = False
    autocommit_batches: ClassVar[bool] = False
    # Every delivery waits for SQLite's one write lock while a prune batch holds it.
    prune_busy_batch_seconds: ClassVar[float] = 0.005
    django_vendors: ClassVar[tuple[str, ...]] = ("sqlite",)
    async_drivers: ClassVar[Mapping[str, str]] = {"aiosqlite": "aiosqlite"}
    errors: ClassVar[ErrorReader] = SQLiteErrors()
