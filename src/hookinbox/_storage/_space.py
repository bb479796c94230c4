"""Space after a prune: the WAL folded back without stalling writers, and (SQLite) free pages
given back to the file system.

SQLite reuses the pages a prune frees for new rows by itself, but the file does not shrink.
A database created by this version (`auto_vacuum=INCREMENTAL`, set by the engine before the
first table exists) can return them with `PRAGMA incremental_vacuum`, a few pages per short
write transaction; an older file needs one `VACUUM` while nothing writes (docs/storage.md).

The WAL is folded back into the database (a checkpoint) by whichever connection commits past
its threshold (1,000 pages), which during a prune is often the ingest writer, paying for the
pruner's pages while deliveries wait. The pruner checkpoints too (once a second), in PASSIVE
mode: it copies what it can without waiting for, or blocking, anyone.

PostgreSQL needs none of this here: autovacuum makes the space reusable, and docs/storage.md
has what to tune for a large inbox.
"""

from __future__ import annotations

from typing import Any

from hookinbox._storage._errors import translate_errors
from hookinbox._storage._store import Store


def checkpoint_passive(store: Store) -> None:
    """Fold what the WAL holds into the database without waiting for anyone (SQLite)."""
    if store.dialect != "sqlite":
        return
    with translate_errors():
        raw = store.engine.raw_connection()
        try:  # outside any transaction: a checkpoint cannot run inside one
            driver: Any = raw.driver_connection
            driver.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        finally:
            raw.close()


def free_pages(store: Store) -> int:
    """Pages the file holds but no table uses (SQLite), 0 elsewhere."""
    if store.dialect != "sqlite":
        return 0
    with translate_errors(), store.engine.connect() as connection:
        return int(connection.exec_driver_sql("PRAGMA freelist_count").scalar_one())


def give_back_pages(store: Store, pages: int) -> int:
    """Return up to `pages` free pages to the file system in one short write (SQLite files
    created with incremental auto-vacuum); how many were returned."""
    if store.dialect != "sqlite":
        return 0
    with store.writing(), translate_errors():
        raw = store.engine.raw_connection()
        try:
            sqlite: Any = raw.driver_connection
            if sqlite.execute("PRAGMA auto_vacuum").fetchone()[0] != 2:  # 2: INCREMENTAL
                return 0
            before = sqlite.execute("PRAGMA freelist_count").fetchone()[0]
            # As a script: sqlite3's execute() would step the pragma once, one page.
            script = f"BEGIN IMMEDIATE; PRAGMA incremental_vacuum({int(pages)}); COMMIT;"
            sqlite.executescript(script)
            after = sqlite.execute("PRAGMA freelist_count").fetchone()[0]
        finally:
            raw.close()
    return int(before) - int(after)
