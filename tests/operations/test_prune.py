"""Retention: batches that never stall ingest, nothing unfinished deleted, one run per day."""

from __future__ import annotations

import asyncio
import hashlib
import multiprocessing
import sqlite3
import threading
import time as clock
from collections.abc import Callable
from datetime import UTC, datetime, time, timedelta
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from hookinbox import ConfigurationError, Inbox, Status
from hookinbox._operations import DailyJob, check_retention, current_slot, prune
from hookinbox._operations._pacing import Pacer
from hookinbox._operations._prune import PruneResult, Retentions
from hookinbox._records import Pressure
from hookinbox._storage import Store
from hookinbox._storage._schema import deliveries, events
from hookinbox.sources import GitHub, Shopify, Stripe
from tests.apps import orders as orders_app
from tests.processing.conftest import checkout
from tests.support.server import running_server
from tests.support.signing import stripe_delivery

OLD = datetime.now(UTC) - timedelta(days=120)


def old_rows(count: int, status: Status, prefix: str) -> list[dict[str, object]]:
    body = b'{"id": "old"}'
    return [
        {
            "source": "stripe",
            "event_id": f"{prefix}_{n}",
            "event_type": "charge.succeeded",
            "occurred_at": OLD,
            "received_at": OLD,
            "body": body,
            "headers": "{}",
            "body_sha256": hashlib.sha256(body).hexdigest(),
            "status": status.value,
            "attempts": 1,
            "deferrals": 0,
            "next_attempt_at": OLD,
            "delivery_count": 1,
            "key_conflicts": 0,
            "last_delivery_at": OLD,
        }
        for n in range(count)
    ]


def insert_old(store: Store, count: int, status: Status, prefix: str) -> None:
    rows = old_rows(count, status, prefix)
    log = [
        {"source": "stripe", "event_id": r["event_id"], "received_at": OLD,
         "duplicate": False, "key_conflict": False}
        for r in rows
    ]  # fmt: skip
    with store.transaction() as connection:
        for start in range(0, count, 10_000):
            connection.execute(events.insert(), rows[start : start + 10_000])
            connection.execute(deliveries.insert(), log[start : start + 10_000])


def count_by_status(store: Store) -> dict[str, int]:
    with store.engine.connect() as connection:
        rows = connection.execute(
            sa.select(events.c.status, sa.func.count()).group_by(events.c.status)
        )
        return {status: int(n) for status, n in rows}


async def _steady_load(base_url: str, stop: threading.Event) -> list[int]:
    statuses: list[int] = []
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:
        number = 0
        while not stop.is_set() or number < 200:
            headers, body = stripe_delivery(checkout(f"live_{number}"), orders_app.STRIPE_SECRET)
            response = await client.post("/webhooks/stripe", headers=headers, content=body)
            statuses.append(response.status_code)
            number += 1
    return statuses


def pruned_under_load(
    db_url: str,
    store: Store,
    retention: timedelta | Retentions,
    progress: Callable[[int], None] | None = None,
) -> tuple[PruneResult, list[int]]:
    """A prune of `store` while a server on the same database takes a steady load of
    deliveries: its result, and the status of every delivery sent meanwhile (200 at least)."""
    stop = threading.Event()
    with running_server("tests.apps.orders:inbox", db_url, "--no-worker") as base_url:
        results: list[list[int]] = []
        load = threading.Thread(
            target=lambda: results.append(asyncio.run(_steady_load(base_url, stop)))
        )
        load.start()
        result = prune(
            store.housekeeping, now=datetime.now(UTC), retention=retention, progress=progress
        )
        stop.set()
        load.join(timeout=120)
    [statuses] = results
    return result, statuses


@pytest.mark.slow
def test_20000_old_rows_are_pruned_while_ingest_keeps_answering(db_url: str) -> None:
    store = Store(db_url)
    insert_old(store, 20_000, Status.PROCESSED, "done")
    insert_old(store, 50, Status.PENDING, "waiting")
    insert_old(store, 50, Status.FAILED, "broken")
    insert_old(store, 50, Status.STALE, "held")
    insert_old(store, 50, Status.DEFERRED, "later")
    batches: list[int] = []
    result, statuses = pruned_under_load(db_url, store, timedelta(days=90), progress=batches.append)
    assert result.events == 20_000
    # The log is pruned by its own time: the kept events' old deliveries go too.
    assert result.deliveries == 20_200
    # Paced: short transactions while the server stores deliveries, not one big one.
    assert len(batches) >= 8 and max(batches) <= Pacer().max_rows, batches
    assert len(statuses) >= 200
    assert set(statuses) == {200}  # ingest never got a 503 while the pruner ran
    remaining = count_by_status(store)
    assert remaining.get("processed", 0) == 0
    assert remaining["failed"] == remaining["stale"] == remaining["deferred"] == 50
    assert remaining["pending"] == 50 + len(statuses)  # the old waiting ones and the new ones
    store.dispose()


def test_each_table_s_batch_is_sized_by_the_pacer_not_their_sum(store: Store) -> None:
    """A batch deletes up to `rows` events and up to `rows` log rows: paced by their sum, every
    batch took twice the time the pacer aimed at (SQLite, 1M rows: 38 ms for 20)."""
    insert_old(store, 1_000, Status.PROCESSED, "done")  # and 1,000 delivery log rows
    seen: list[tuple[int, int]] = []

    class Recording(Pacer):
        def next_pause(self, rows_done: int, took: float, pressure: Pressure) -> float:
            seen.append((rows_done, self.rows))
            return 0.0

    result = prune(
        store.housekeeping,
        now=datetime.now(UTC),
        retention=timedelta(days=90),
        pacer=Recording(rows=300),
    )
    assert result.events == 1_000 and result.deliveries == 1_000
    assert [done for done, _ in seen] == [300, 300, 300, 100]
    assert all(done <= rows for done, rows in seen)


def test_a_stop_ends_the_prune_between_batches_and_keeps_what_it_deleted(store: Store) -> None:
    """The worker's shutdown during the daily prune: the pause after a batch is cut short and
    no batch follows; the rest waits for the next run."""
    insert_old(store, 1_000, Status.PROCESSED, "done")
    stop = threading.Event()

    class StopAfterFirst(Pacer):
        def next_pause(self, rows_done: int, took: float, pressure: Pressure) -> float:
            stop.set()
            return 60.0  # waited on `stop`, so not waited at all

    started = clock.monotonic()
    result = prune(
        store.housekeeping,
        now=datetime.now(UTC),
        retention=timedelta(days=90),
        pacer=StopAfterFirst(rows=300),
        stop=stop,
    )
    assert clock.monotonic() - started < 30
    assert result.events == 300
    assert count_by_status(store) == {"processed": 700}


def test_stopping_the_daily_job_waits_for_its_run_to_end(store: Store) -> None:
    """A job still running after the worker returned would use a store the application may be
    closing: stop() returns once the run noticed it."""
    ran = threading.Event()
    ended = threading.Event()

    def job(stop: threading.Event) -> str:
        ran.set()
        stop.wait(60)
        ended.set()
        return "stopped"

    daily = DailyJob(
        store.housekeeping, job, at=time(4, 0, tzinfo=UTC), clock=lambda: datetime.now(UTC)
    )
    daily.start()
    assert ran.wait(10)
    daily.stop()
    assert ended.is_set() and not daily.is_alive()


def test_a_dry_run_deletes_nothing(store: Store) -> None:
    insert_old(store, 30, Status.UNHANDLED, "unhandled")
    result = prune(
        store.housekeeping, now=datetime.now(UTC), retention=timedelta(days=90), dry_run=True
    )
    assert (result.events, result.deliveries, result.dry_run) == (30, 30, True)
    assert count_by_status(store) == {"unhandled": 30}


def test_recent_done_events_are_kept(store: Store) -> None:
    insert_old(store, 10, Status.PROCESSED, "old")
    result = prune(store.housekeeping, now=datetime.now(UTC), retention=timedelta(days=200))
    assert result.events == 0
    assert count_by_status(store) == {"processed": 10}


def test_a_retention_shorter_than_a_redelivery_window_is_refused() -> None:
    sources = [Stripe(secret="whsec_x"), Shopify(secret="x"), GitHub(secret="x")]
    with pytest.raises(ConfigurationError, match="stripe's redelivery window"):
        check_retention(timedelta(days=7), sources, force=False)
    check_retention(timedelta(days=7), sources, force=True)
    check_retention(timedelta(days=30), sources, force=False)
    check_retention(timedelta(days=2), [Shopify(secret="x")], force=False)  # 48 h window
    with pytest.raises(ConfigurationError):
        Inbox("sqlite:///x.db", retention=timedelta(days=7)).add_source(Stripe(secret="whsec_x"))
    Inbox("sqlite:///x.db", retention=timedelta(days=7), allow_short_retention=True).add_source(
        Stripe(secret="whsec_x")
    )


def test_an_event_older_than_the_retention_is_held_as_stale(db_url: str) -> None:
    orders_app.create_tables(db_url)
    inbox = orders_app.build(db_url)
    event = checkout(1)
    event["created"] = int((datetime.now(UTC) - timedelta(days=91)).timestamp())
    headers, body = stripe_delivery(event, orders_app.STRIPE_SECRET)
    reply = inbox.receive("stripe", headers, body)
    assert reply.body == {"status": "accepted", "event_id": "evt_1"}  # the provider may stop
    assert inbox.process_due() == 0  # never processed blindly
    stored = inbox.store.get_event("stripe", "evt_1")
    assert stored is not None and stored.status is Status.STALE
    inbox.close()


def test_daily_slots() -> None:
    at = time(4, 0, tzinfo=UTC)
    assert current_slot(datetime(2026, 5, 2, 4, 0, tzinfo=UTC), at) == datetime(
        2026, 5, 2, 4, 0, tzinfo=UTC
    )
    assert current_slot(datetime(2026, 5, 2, 3, 59, tzinfo=UTC), at) == datetime(
        2026, 5, 1, 4, 0, tzinfo=UTC
    )


def _claim(url: str, slot: datetime, barrier: multiprocessing.synchronize.Barrier,
           results: multiprocessing.Queue[bool]) -> None:  # fmt: skip
    store = Store(url)
    barrier.wait()
    results.put(store.housekeeping.claim_job("prune", slot, datetime.now(UTC)))
    store.dispose()


@pytest.mark.slow  # processes: `make test`, not `make test-fast`
def test_one_process_of_many_wins_each_daily_slot(db_url: str) -> None:
    context = multiprocessing.get_context("spawn")
    for day in (1, 2):  # the first claim creates the job's row; the second updates it
        slot = datetime.now(UTC) + timedelta(days=day)
        barrier = context.Barrier(4)
        results: multiprocessing.Queue[bool] = context.Queue()
        processes = [
            context.Process(target=_claim, args=(db_url, slot, barrier, results)) for _ in range(4)
        ]
        for process in processes:
            process.start()
        outcomes = [results.get(timeout=60) for _ in processes]
        for process in processes:
            process.join(timeout=30)
        assert sorted(outcomes) == [False, False, False, True]


def test_the_scheduled_job_runs_once_per_slot(store: Store) -> None:
    runs: list[str] = []
    now = datetime(2026, 5, 2, 4, 30, tzinfo=UTC)

    def job(stop: threading.Event) -> str:
        runs.append("ran")
        return "done"

    first = DailyJob(store.housekeeping, job, at=time(4, 0, tzinfo=UTC), clock=lambda: now)
    second = DailyJob(store.housekeeping, job, at=time(4, 0, tzinfo=UTC), clock=lambda: now)
    assert first.run_due() is True
    assert second.run_due() is False  # same slot, already claimed
    now += timedelta(days=1)
    assert second.run_due() is True
    assert runs == ["ran", "ran"]


def last_job_result(store: Store) -> str | None:
    with store.engine.connect() as connection:
        rows = connection.execute(sa.text("SELECT last_result FROM hookinbox_jobs")).all()
    return rows[0].last_result if rows else None


def test_workers_run_the_daily_prune(db_url: str) -> None:
    from hookinbox import WorkerOptions

    orders_app.create_tables(db_url)
    inbox = orders_app.build(db_url)
    store = Store(db_url)
    insert_old(store, 20, Status.PROCESSED, "done")
    worker = inbox.worker(WorkerOptions(handle_signals=False, poll_interval=0.05))
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        # The job records its result once the whole prune is over (freed pages given back
        # too), a moment after the rows are gone: wait for the record, not for the rows.
        deadline = datetime.now(UTC) + timedelta(seconds=15)
        while last_job_result(store) is None and datetime.now(UTC) < deadline:
            threading.Event().wait(0.1)
        assert count_by_status(store) == {}
    finally:
        worker.stop()
        thread.join(timeout=10)
    assert last_job_result(store) == (
        "deleted 20 events, 20 delivery log rows and 0 delivered outbox messages"
    )
    store.dispose()
    inbox.close()


def test_sqlite_gives_the_pruned_space_back(tmp_path: Path) -> None:
    """A file created by hookinbox has incremental auto-vacuum: the pages a prune frees go
    back to the file system, in short paced writes, and the file shrinks."""
    path = tmp_path / "space.db"
    store = Store(f"sqlite:///{path}")
    insert_old(store, 20_000, Status.PROCESSED, "done")
    raw = sqlite3.connect(path, isolation_level=None)  # outside any transaction
    assert raw.execute("PRAGMA auto_vacuum").fetchone() == (2,)
    raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    before = path.stat().st_size

    result = prune(store.housekeeping, now=datetime.now(UTC), retention=timedelta(days=90))

    raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert raw.execute("PRAGMA freelist_count").fetchone() == (0,)
    raw.close()
    assert result.events == 20_000 and result.pages_returned > 0
    assert path.stat().st_size < before / 2, (before, path.stat().st_size)
    store.dispose()
