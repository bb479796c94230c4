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
    [
        "sqlite://",
        "sqlite:///:memory:",
        "mysql+mysqlconnector://x@y/z",
        "mssql://x@y/z",
        "not a url",
        "sqlite+pysqlcipher:///x.db",
    ],
)
def test_unsupported_urls_are_configuration_errors(url: str) -> None:
    with pytest.raises(ConfigurationError):
        parse_url(url)


@pytest.mark.parametrize(
    "url",
    [
        "mysql://u@h/db",
        "mariadb://u@h/db",
        "mysql+pymysql://u@h/db",
        "mysql+mysqldb://u@h/db",
        "mariadb+pymysql://u@h/db",
    ],
)
def test_mysql_and_mariadb_urls_use_pymysql_in_utf8mb4(url: str) -> None:
    parsed = parse_url(url)
    assert parsed.drivername == "mysql+pymysql"
    assert parsed.query["charset"] == "utf8mb4"
    assert parse_url(url + "?charset=latin1").query["charset"] == "latin1"  # refused on connect


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

    url = f"sqlite:///{tmp_path / 'a.db'}"
    store = Store(url, StoreOptions(busy_timeout=0.2))
    store.migrate()
    writer = Store(url)
    with writer.engine.begin() as connection:  # BEGIN IMMEDIATE: the write lock is taken
        connection.execute(sa.text("SELECT 1"))
        assert store.events.has_due(datetime.now(UTC)) is False
        assert store.get_event("stripe", "evt_none") is None
    store.dispose()
    writer.dispose()


def test_a_sqlite_writer_takes_the_lock_in_the_first_gap_another_process_leaves(
    tmp_path: Path,
) -> None:
    """Another process (here a connection of its own, as SQLite sees no difference) commits
    300 ms transactions 10 ms apart. SQLite's own busy handler, sleeping up to 100 ms between
    tries, missed gap after gap (1.7-2.0 s measured); hookinbox's writer tries every
    millisecond and gets in at the end of the transaction under way."""
    import sqlite3
    import threading
    import time

    path = tmp_path / "a.db"
    store = Store(f"sqlite:///{path}")
    store.migrate()
    other = sqlite3.connect(path, isolation_level=None, timeout=5, check_same_thread=False)
    holding = threading.Event()
    stop = threading.Event()

    def busy_process() -> None:
        while not stop.is_set():
            other.execute("BEGIN IMMEDIATE")
            holding.set()
            time.sleep(0.3)
            other.execute("COMMIT")
            time.sleep(0.01)

    thread = threading.Thread(target=busy_process)
    thread.start()
    try:
        holding.wait()
        started = time.monotonic()
        with store.transaction() as connection:
            waited = time.monotonic() - started
            # SQLite's own timeout is back for the statements that follow.
            assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar() == 5000
    finally:
        stop.set()
        thread.join()
        other.close()
        store.dispose()
    assert waited < 0.5, waited  # the rest of one 300 ms transaction, and a millisecond


@pytest.mark.parametrize(
    ("url", "sync", "asynchronous"),
    [
        ("postgresql+asyncpg://u@h/db", "postgresql+psycopg", "postgresql+asyncpg"),
        ("postgresql+psycopg_async://u@h/db", "postgresql+psycopg", "postgresql+psycopg_async"),
        ("sqlite+aiosqlite:///x.db", "sqlite", "sqlite+aiosqlite"),
        ("postgresql://u@h/db", "postgresql+psycopg", None),
        ("sqlite:///x.db", "sqlite", None),
    ],
)
def test_an_async_url_names_the_workers_driver_and_a_sync_one_for_the_rest(
    url: str, sync: str, asynchronous: str | None
) -> None:
    """One URL: hookinbox's own work on the sync driver, the worker on the async one."""
    from hookinbox._storage import async_url

    assert parse_url(url).drivername == sync
    found = async_url(url)
    assert (found.drivername if found is not None else None) == asynchronous


@pytest.mark.parametrize("url", ["mysql+aiomysql://r@h/db", "mariadb+asyncmy://r@h/db"])
def test_mariadbs_async_drivers_are_refused_in_one_line(url: str) -> None:
    with pytest.raises(ConfigurationError, match="no async worker on MariaDB") as refused:
        parse_url(url)
    assert "\n" not in str(refused.value)
