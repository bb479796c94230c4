"""`Store.housekeeping_transaction()`: the pruner's transactions skip the fsync of their own
commit on SQLite, and leave every pooled connection as durable as they found it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from hookinbox._storage import Store
from hookinbox._storage._schema import events

FULL, NORMAL = 2, 1


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[Store]:
    store = Store(f"sqlite:///{tmp_path / 'inbox.db'}")
    store.migrate()
    yield store
    store.dispose()


def synchronous(connection: sa.Connection) -> int:
    return int(connection.exec_driver_sql("PRAGMA synchronous").scalar_one())


def test_only_the_housekeeping_transaction_is_not_synced(sqlite_store: Store) -> None:
    with sqlite_store.housekeeping_transaction() as connection:
        assert synchronous(connection) == NORMAL
        connection.execute(events.delete())
    with sqlite_store.transaction() as connection:  # the same pooled connection, durable again
        assert synchronous(connection) == FULL


def test_a_failed_housekeeping_transaction_rolls_back_and_restores(sqlite_store: Store) -> None:
    with pytest.raises(RuntimeError), sqlite_store.housekeeping_transaction() as connection:
        connection.exec_driver_sql("UPDATE hookinbox_schema_versions SET version = version + 100")
        raise RuntimeError("a batch that failed")
    with sqlite_store.transaction() as connection:
        assert synchronous(connection) == FULL
        versions = connection.exec_driver_sql("SELECT max(version) FROM hookinbox_schema_versions")
        assert versions.scalar_one() < 100  # rolled back
