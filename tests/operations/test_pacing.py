"""The pruner's pace: what the database says about other work, and what the pacer makes of it."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from hookinbox import StoreOptions
from hookinbox._operations._pacing import Pacer
from hookinbox._records import Pressure
from hookinbox._storage import PressureGauge, Store
from hookinbox._storage._dialects import dialect_named


def test_the_gauge_sees_other_sessions_work_and_not_its_own(store: Store) -> None:
    gauge = PressureGauge(store)
    other = sa.create_engine(store.engine.url, poolclass=sa.NullPool)
    try:
        gauge.mark()
        assert gauge.sample() == Pressure(0, 0)  # nobody else did anything
        gauge.mark()
        with other.connect() as connection:  # another session commits a write (and stays,
            # as a pooled connection does: PostgreSQL lists only sessions still connected)
            connection.exec_driver_sql("UPDATE hookinbox_schema_versions SET version = version")
            connection.commit()
            assert gauge.sample().busy
        gauge.mark()
        assert not gauge.sample().busy  # the window starts again at each mark
    finally:
        gauge.close()
        other.dispose()


def test_busy_batches_are_short_and_sparse() -> None:
    pacer = Pacer(rows=500)
    # 500 rows took 0.25 s while others worked: 0.5 ms a row, so 20 ms is 40 rows, and the
    # floor is 50.
    pause = pacer.next_pause(500, 0.25, Pressure(others=2, waiting=0))
    assert pacer.rows == pacer.min_rows == 50
    assert pause == pytest.approx(0.25 * 0.85 / 0.15)  # a duty cycle of 15 %
    pacer = Pacer(rows=500)
    pacer.next_pause(500, 0.05, Pressure(others=2, waiting=0))  # 0.1 ms a row: 200 rows
    assert pacer.rows == 200


def test_idle_batches_grow_towards_half_a_second_and_follow_closely() -> None:
    pacer = Pacer(rows=500)
    for _ in range(40):
        pause = pacer.next_pause(pacer.rows, pacer.rows * 1e-4, Pressure(0, 0))  # 0.1 ms a row
    assert pacer.rows == pacer.max_rows  # 0.5 s would be 5,000 rows: the cap
    assert pause < 0.06  # 0.5 s of work, a tenth of it as pause


def test_the_database_is_idle_only_after_a_quiet_second() -> None:
    pacer = Pacer(rows=500)
    # The first window of a run lasts no time: that nobody committed in it proves nothing.
    pause = pacer.next_pause(500, 0.02, Pressure(0, 0))
    assert pacer.rows == 500 and pause == pytest.approx(0.02 * 0.85 / 0.15)
    pauses = [pause]
    while sum(pauses) < pacer.idle_after:  # quiet pauses, but not yet a second of them
        pauses.append(pacer.next_pause(500, 0.02, Pressure(0, 0)))
        assert pacer.rows == 500
    # A second of quiet: idle, longer batches, short pauses.
    pause = pacer.next_pause(500, 0.02, Pressure(0, 0))
    assert pacer.rows > 500 and pause == pytest.approx(0.02 * 0.1 / 0.9)
    # One commit by someone else: busy again at once, and the quiet starts over.
    pacer.next_pause(pacer.rows, 0.02 * pacer.rows / 500, Pressure(others=1, waiting=0))
    assert pacer.rows == 500 and pacer.quiet == 0.0


def test_others_waiting_double_the_pause_until_they_no_longer_wait() -> None:
    pacer = Pacer(rows=100)
    waiting = Pressure(others=1, waiting=3)
    pauses = [pacer.next_pause(100, 0.01, waiting) for _ in range(8)]
    assert pauses == sorted(pauses) and pauses[-1] == pacer.max_pause
    # No one waits any more: back to the duty cycle's pause alone.
    assert pacer.next_pause(100, 0.01, Pressure(others=1, waiting=0)) == pytest.approx(
        0.01 * 0.85 / 0.15
    )


def test_the_gauge_reads_sqlite_without_queueing_for_the_write_lock(tmp_path: Path) -> None:
    """The gauge samples twice per batch: taking the write lock for it (BEGIN IMMEDIATE) put
    it in the way of the deliveries it measures, and behind the writer that holds it."""
    path = tmp_path / "inbox.db"
    store = Store(f"sqlite:///{path}", StoreOptions(busy_timeout=0.5))
    store.migrate()
    gauge = PressureGauge(store)
    writer = sqlite3.connect(path, isolation_level=None)  # another process, as SQLite sees it
    try:
        gauge.mark()
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("UPDATE hookinbox_schema_versions SET version = version")
        started = time.monotonic()
        assert gauge.sample() == Pressure(0, 0)  # nothing committed yet, and no wait for it
        assert time.monotonic() - started < 0.25
        writer.execute("COMMIT")
        assert gauge.sample().busy
    finally:
        writer.close()
        gauge.close()
        store.dispose()


def test_sqlite_batches_are_shorter_while_others_write() -> None:
    """A SQLite batch holds the one write lock that every delivery waits for."""
    sqlite = Pacer.for_dialect(dialect_named("sqlite"), rows=500)
    postgres = Pacer.for_dialect(dialect_named("postgresql"), rows=500)
    others = Pressure(others=1, waiting=0)
    sqlite.next_pause(500, 0.05, others)  # 0.1 ms a row
    postgres.next_pause(500, 0.05, others)
    assert (sqlite.rows, postgres.rows) == (50, 200)  # 5 ms (the floor: 50 rows) and 20 ms
