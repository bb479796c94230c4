"""The compatible schema range: each version records the oldest code that runs on it, and code
older than the database runs on it only when the database says so (docs/upgrading.md)."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
import sqlalchemy as sa

from hookinbox import ConfigurationError
from hookinbox._storage import LATEST_VERSION, Store
from hookinbox._storage._compatibility import Kind, Migration, State, oldest_code
from hookinbox._storage._migrations import MIGRATIONS, migrate
from hookinbox._storage._schema import schema_versions

ROOT = Path(__file__).resolve().parents[2]


def _recorded(store: Store) -> dict[int, int | None]:
    with store.engine.connect() as connection:
        rows = connection.execute(
            sa.select(schema_versions.c.version, schema_versions.c.min_code_version)
        )
        return {version: oldest for version, oldest in rows}


def _expected(versions: range) -> dict[int, int | None]:
    return {version: oldest_code(MIGRATIONS, version) for version in versions}


def test_each_version_records_the_oldest_code_that_runs_on_it(empty_db_url: str) -> None:
    store = Store(empty_db_url)
    store.migrate()
    recorded = _recorded(store)
    store.dispose()
    assert recorded == _expected(range(1, LATEST_VERSION + 1))
    assert recorded[8] == 1 and recorded[9] == 9  # schema 9 made older processes fail closed


def test_upgrading_from_11_records_the_versions_applied_before(empty_db_url: str) -> None:
    store = Store(empty_db_url)
    migrate(store.engine, target=11)
    with store.engine.connect() as connection:
        columns = [c["name"] for c in sa.inspect(connection).get_columns(schema_versions.name)]
    assert columns == ["version", "applied_at"]  # as every hookinbox before schema 12 kept it
    assert store.migrate() == (11, LATEST_VERSION)
    assert _recorded(store) == _expected(range(1, LATEST_VERSION + 1))
    store.dispose()


def _newer(store: Store, needs: int | None) -> None:
    with store.engine.begin() as connection:
        connection.execute(
            schema_versions.insert().values(
                version=LATEST_VERSION + 1, applied_at=sa.func.now(), min_code_version=needs
            )
        )


def test_a_newer_schema_that_runs_with_this_code_is_run_on(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = Store(db_url)
    _newer(store, needs=LATEST_VERSION)
    with caplog.at_level(logging.WARNING, "hookinbox"):
        assert store.migrate() == (LATEST_VERSION + 1, LATEST_VERSION + 1)
    assert "newer than this hookinbox's" in caplog.text
    assert store.schema_status().state is State.NEWER_COMPATIBLE
    assert store.migration_plan(LATEST_VERSION + 1) == []
    checking = Store(db_url, auto_migrate=False)  # the operator commands, Django
    checking.ensure_schema()
    for opened in (store, checking):
        opened.dispose()


def test_a_newer_schema_that_needs_newer_code_is_refused_by_every_start(db_url: str) -> None:
    store = Store(db_url)
    _newer(store, needs=LATEST_VERSION + 1)
    needs = f"needs the code of schema {LATEST_VERSION + 1} or later: upgrade hookinbox"
    with pytest.raises(ConfigurationError, match=needs):
        store.migrate()
    checking = Store(db_url, auto_migrate=False)
    with pytest.raises(ConfigurationError, match=needs):
        checking.ensure_schema()
    assert store.schema_status().state is State.NEWER_INCOMPATIBLE
    with store.engine.connect() as connection:  # nothing was written
        newest = connection.execute(sa.select(sa.func.max(schema_versions.c.version))).scalar()
    assert newest == LATEST_VERSION + 1
    for opened in (store, checking):
        opened.dispose()


def test_an_older_schema_is_pending_and_planned(empty_db_url: str) -> None:
    store = Store(empty_db_url, auto_migrate=False)
    assert store.schema_status().state is State.PENDING
    migrate(store.engine, target=10)
    status = store.schema_status()
    assert (status.state, status.version) == (State.PENDING, 10)
    assert "6 migrations pending (11, 12, 13, 14, 15, 16)" in status.describe()
    planned = store.migration_plan(status.version)
    assert [(p.version, p.kind, p.min_code_version) for p in planned] == [
        (11, Kind.EXPAND, 9),
        (12, Kind.EXPAND, 9),
        (13, Kind.EXPAND, 9),
        (14, Kind.CONTRACT, 14),
        (15, Kind.CONTRACT, 15),
        (16, Kind.EXPAND, 15),
    ]
    with pytest.raises(ConfigurationError, match="run `hookinbox migrate`"):
        store.ensure_schema()
    store.dispose()


def _step(_op: object) -> None:
    pass


def test_a_contract_step_raises_the_oldest_code_and_an_expand_step_keeps_it() -> None:
    steps = (
        Migration(_step, Kind.EXPAND, "a"),
        Migration(_step, Kind.EXPAND, "b"),
        Migration(_step, Kind.CONTRACT, "c"),  # older code broke: needs its own version
        Migration(_step, Kind.EXPAND, "d"),
        Migration(_step, Kind.CONTRACT, "e", needs=4),  # removes what 4 stopped using
    )
    assert [oldest_code(steps, v) for v in range(1, 6)] == [1, 1, 3, 3, 4]


def test_docs_upgrading_classifies_every_migration_as_the_code_does() -> None:
    page = (ROOT / "docs" / "upgrading.md").read_text()
    table = page.split("## How each migration is classified", 1)[1]
    rows = re.findall(r"^\| (\d+) \| (expand|contract) \| (\d+) \|", table, re.MULTILINE)
    assert [(int(v), kind, int(oldest)) for v, kind, oldest in rows] == [
        (version, migration.kind.value, oldest_code(MIGRATIONS, version))
        for version, migration in enumerate(MIGRATIONS, 1)
    ]


def test_the_rollback_before_schema_12_is_one_statement_and_the_upgrade_runs_again(
    empty_db_url: str,
) -> None:
    """docs/upgrading.md: to run a hookinbox before schema 12 again, its row is deleted (the
    column stays, unseen by that code); the next upgrade finds the column and runs on."""
    store = Store(empty_db_url)
    store.migrate()
    with store.engine.begin() as connection:
        connection.exec_driver_sql(_statement_in_docs("DELETE FROM hookinbox_schema_versions"))
    assert store.schema_status().version == 11
    assert store.migrate() == (11, LATEST_VERSION)
    assert _recorded(store) == _expected(range(1, LATEST_VERSION + 1))
    store.dispose()


def _statement_in_docs(start: str) -> str:
    page = (ROOT / "docs" / "upgrading.md").read_text()
    (statement,) = re.findall(rf"^({re.escape(start)}[^;]*);$", page, re.MULTILINE)
    return statement
