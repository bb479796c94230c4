"""The schema: built by migrations, equal to the live tables, safe to run concurrently."""

from __future__ import annotations

import multiprocessing

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from hookinbox import ConfigurationError
from hookinbox._storage import LATEST_VERSION, Store, metadata
from hookinbox._storage._schema import schema_versions


def test_migrating_an_empty_database_builds_the_live_schema(empty_db_url: str) -> None:
    store = Store(empty_db_url)
    assert store.migrate() == (0, LATEST_VERSION)
    with store.engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        differences = compare_metadata(context, metadata)
    store.dispose()
    assert differences == []


def test_migrating_twice_changes_nothing(empty_db_url: str) -> None:
    store = Store(empty_db_url)
    store.migrate()
    assert store.migrate() == (LATEST_VERSION, LATEST_VERSION)
    with store.engine.connect() as connection:
        versions = connection.execute(sa.select(schema_versions.c.version)).scalars().all()
    store.dispose()
    assert versions == list(range(1, LATEST_VERSION + 1))


def _migrate(url: str, barrier: multiprocessing.synchronize.Barrier) -> None:
    store = Store(url)
    barrier.wait()
    store.migrate()
    store.dispose()


def test_concurrent_first_starts_migrate_once(empty_db_url: str) -> None:
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(4)
    processes = [context.Process(target=_migrate, args=(empty_db_url, barrier)) for _ in range(4)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    store = Store(empty_db_url)
    with store.engine.connect() as connection:
        versions = connection.execute(sa.select(schema_versions.c.version)).scalars().all()
    store.dispose()
    assert versions == list(range(1, LATEST_VERSION + 1))


def test_a_newer_schema_is_refused(db_url: str) -> None:
    store = Store(db_url)
    with store.engine.begin() as connection:
        connection.execute(
            schema_versions.insert().values(version=LATEST_VERSION + 1, applied_at=sa.func.now())
        )
    with pytest.raises(ConfigurationError, match="newer than this hookinbox"):
        store.migrate()
    store.dispose()


def test_without_auto_migrate_a_missing_schema_is_reported(empty_db_url: str) -> None:
    store = Store(empty_db_url, auto_migrate=False)
    with pytest.raises(ConfigurationError, match="hookinbox migrate"):
        store.ensure_schema()
    store.dispose()
