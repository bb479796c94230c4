"""The schema: built by migrations, equal to the live tables, safe to run concurrently."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from hookinbox import ConfigurationError
from hookinbox._storage import LATEST_VERSION, Store
from hookinbox._storage._schema import metadata, schema_versions


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


@pytest.mark.slow  # processes: `make test`, not `make test-fast`
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


def _live_schema_differences(store: Store) -> list[object]:
    with store.engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        return list(compare_metadata(context, metadata))


def _due_indexes(store: Store) -> set[str]:
    inspector = sa.inspect(store.engine)
    names = {
        index["name"]
        for table in ("hookinbox_events", "hookinbox_outbox")
        for index in inspector.get_indexes(table)
    }
    return {name for name in names if name and "_due" in name}


def test_upgrading_from_7_builds_the_due_indexes_in_lease_order(empty_db_url: str) -> None:
    store = Store(empty_db_url)
    _migrate_to(store, 7)
    assert _due_indexes(store) == {"ix_hookinbox_events_due", "ix_hookinbox_outbox_due"}
    assert store.migrate(8) == (7, 8)
    assert _due_indexes(store) == {
        "ix_hookinbox_events_due_order",
        "ix_hookinbox_outbox_due_order",
    }
    assert store.migrate() == (8, LATEST_VERSION)
    assert _live_schema_differences(store) == []
    store.dispose()


@pytest.mark.parametrize("backend", ["postgres"])
def test_indexes_built_concurrently_beforehand_are_kept_by_the_upgrade(
    empty_db_url: str,
) -> None:
    """docs/storage.md's statements, run as written while schema 7 is live: the step then
    only drops the old indexes (it would fail or build twice if the names did not match)."""
    store = Store(empty_db_url)
    _migrate_to(store, 7)
    with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        for statement in _upgrade_statements():
            connection.exec_driver_sql(statement)
    with store.engine.connect() as connection:
        oids_before = _index_oids(connection)
    assert store.migrate(8) == (7, 8)
    with store.engine.connect() as connection:
        assert _index_oids(connection) == oids_before  # the same indexes, not rebuilt
    assert _due_indexes(store) == {
        "ix_hookinbox_events_due_order",
        "ix_hookinbox_outbox_due_order",
    }
    store.dispose()


def _migrate_to(store: Store, version: int) -> None:
    from hookinbox._storage import _migrations

    _migrations.migrate(store.engine, target=version)


def _index_oids(connection: sa.Connection) -> dict[str, int]:
    rows = connection.exec_driver_sql(
        "SELECT indexrelid::regclass::text, indexrelid::int FROM pg_index "
        "WHERE indexrelid::regclass::text LIKE '%%_due_order'"
    )
    return {name: oid for name, oid in rows}


def _upgrade_statements() -> list[str]:
    """The SQL block under "Upgrading to schema 8" in docs/storage.md, one statement each."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "storage.md").read_text()
    section = page.split("### Upgrading to schema 8", 1)[1]
    block = section.split("```sql\n", 1)[1].split("```", 1)[0]
    statements = [s.strip() for s in block.split(";") if s.strip()]
    assert len(statements) == 2 and all("CONCURRENTLY" in s for s in statements)
    return statements
