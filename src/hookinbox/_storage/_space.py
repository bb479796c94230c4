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

from hookinbox._storage._store import Store


def checkpoint_passive(store: Store) -> None:
    """Fold what the WAL holds into the database without waiting for anyone (SQLite)."""
    store.dialect.checkpoint_passive(store)


def free_pages(store: Store) -> int:
    """Pages the file holds but no table uses (SQLite), 0 elsewhere."""
    return store.dialect.free_pages(store)


def give_back_pages(store: Store, pages: int) -> int:
    """Return up to `pages` free pages to the file system in one short write (SQLite files
    created with incremental auto-vacuum); how many were returned."""
    return store.dialect.give_back_pages(store, pages)
