"""Engine set-up: SQLite durability settings and URL handling."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from hookinbox import ConfigurationError, StoreOptions, StoreUnavailable
from hookinbox._storage import Store, parse_url


def _pragma(store: Store, name: str) -> object:
    with store.engine.connect() as connection:
        return connection.exec_driver_sql(f"PRAGMA {name}").scalar()


def test_sqlite_defaults_to_wal_and_full_sync(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'a.db'}")
    assert _pragma(store, "journal_mode") == "wal"
    assert _pragma(store, "synchronous") == 2  # FULL
    assert _pragma(store, "busy_timeout") == 5000
    store.dispose()


def test_sqlite_normal_sync_is_an_explicit_opt_in(tmp_path: Path) -> None:
    options = StoreOptions(sqlite_synchronous="NORMAL", busy_timeout=1.5)
    store = Store(f"sqlite:///{tmp_path / 'a.db'}", options)
    assert _pragma(store, "synchronous") == 1  # NORMAL
    assert _pragma(store, "busy_timeout") == 1500
    store.dispose()


@pytest.mark.parametrize(
    "url",
    ["sqlite://", "sqlite:///:memory:", "mysql://x@y/z", "not a url", "sqlite+aiosqlite:///x.db"],
)
def test_unsupported_urls_are_configuration_errors(url: str) -> None:
    with pytest.raises(ConfigurationError):
        parse_url(url)


def test_postgres_urls_use_psycopg() -> None:
    assert parse_url("postgresql://u@h/db").drivername == "postgresql+psycopg"
    assert parse_url("postgres://u@h/db").drivername == "postgresql+psycopg"


def test_a_locked_sqlite_database_is_unavailable_not_an_error(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    store = Store(url, StoreOptions(busy_timeout=0.2))
    store.migrate()
    blocker = Store(url)
    with blocker.engine.begin() as connection:  # holds the write lock (BEGIN IMMEDIATE)
        connection.execute(sa.text("SELECT 1"))
        with pytest.raises(StoreUnavailable, match="locked"):
            with store.transaction() as other:
                other.execute(sa.text("SELECT 1"))
    store.dispose()
    blocker.dispose()


def test_an_unreachable_server_is_unavailable() -> None:
    store = Store("postgresql://postgres@127.0.0.1:1/none", StoreOptions(connect_timeout=1))
    with pytest.raises(StoreUnavailable):
        store.ping()
    with pytest.raises(StoreUnavailable):
        store.migrate()


def test_reading_sqlite_does_not_wait_for_the_write_lock(tmp_path: Path) -> None:
    """Idle workers poll with reads; a read must not queue behind (or block) a writer."""
    from datetime import UTC, datetime

    from hookinbox._storage import has_due

    url = f"sqlite:///{tmp_path / 'a.db'}"
    store = Store(url, StoreOptions(busy_timeout=0.2))
    store.migrate()
    writer = Store(url)
    with writer.engine.begin() as connection:  # BEGIN IMMEDIATE: the write lock is taken
        connection.execute(sa.text("SELECT 1"))
        assert has_due(store, datetime.now(UTC)) is False
        assert store.get_event("stripe", "evt_none") is None
    store.dispose()
    writer.dispose()
