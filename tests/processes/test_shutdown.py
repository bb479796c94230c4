"""SIGTERM: a worker stops leasing, finishes what it holds within the grace period, exits 0.

Past the grace period it exits 1 at once; the attempt it cut off rolls back with the process
(the event stays `processing` until its lease expires and the sweeper gives it back).
"""

from __future__ import annotations

import signal
import subprocess
import time

import pytest
import sqlalchemy as sa

from hookinbox._storage import Store
from tests.apps import orders
from tests.support.workers import (
    WorkerProcess,
    checkout_event,
    deliver,
    event_row,
    opened_store,
    read_all,
    wait_for,
)


def _applied(store: Store, event_id: str) -> list[sa.Row[object]]:
    table = orders.applied_checkouts
    return read_all(store, sa.select(table.c.id).where(table.c.event_id == event_id))


@pytest.mark.parametrize("concurrency", [1, 2], ids=["busy", "free-slot"])
def test_sigterm_lets_the_attempt_in_flight_finish_and_leases_nothing_new(
    db_url: str, concurrency: int
) -> None:
    """evt_2 arrives after SIGTERM, while evt_1's 2 s attempt is in flight.

    With concurrency 2 a slot is free when it arrives, so only the stop keeps it pending (on
    PostgreSQL; SQLite's single writer stores evt_2 only once evt_1's transaction commits).
    """
    orders.create_tables(db_url)
    inbox = orders.build(db_url)
    worker = WorkerProcess(
        db_url,
        *("--concurrency", str(concurrency), "--grace-period", "10"),
        env={"ORDERS_HANDLER_SLEEP": "2"},
    )
    try:
        with opened_store(db_url) as store:
            deliver(inbox, checkout_event(1))
            wait_for(
                lambda: event_row(store, "evt_1").status == "processing",
                timeout=20,
                what="the worker to lease evt_1",
                describe=worker.describe,
            )
            assert worker.running(), worker.describe()
            signalled = time.monotonic()
            worker.signal(signal.SIGTERM)
            deliver(inbox, checkout_event(2))  # arrives after SIGTERM: must be left alone
            try:
                code = worker.wait(timeout=10)
            except subprocess.TimeoutExpired:
                raise AssertionError(
                    f"no exit within the grace period: {worker.describe()}"
                ) from None
            took = time.monotonic() - signalled
            first, second = event_row(store, "evt_1"), event_row(store, "evt_2")
            assert code == 0, worker.describe()
            assert (first.status, first.outcome, first.attempts) == ("processed", "handled", 1)
            assert len(_applied(store, "evt_1")) == 1
            assert (second.status, second.attempts) == ("pending", 0), dict(second)
            assert not _applied(store, "evt_2")
            print(f"\nexited 0 {took:.1f} s after SIGTERM")
    finally:
        inbox.close()
        worker.close()


def test_an_attempt_cut_off_by_the_grace_period_rolls_back(db_url: str) -> None:
    orders.create_tables(db_url)
    inbox = orders.build(db_url)
    worker = WorkerProcess(
        db_url,
        *("--concurrency", "1", "--grace-period", "0.5"),
        env={"ORDERS_HANDLER_SLEEP": "5"},
    )
    try:
        with opened_store(db_url) as store:
            deliver(inbox, checkout_event(1))
            wait_for(
                lambda: event_row(store, "evt_1").status == "processing",
                timeout=20,
                what="the worker to lease evt_1",
                describe=worker.describe,
            )
            time.sleep(0.3)  # well inside the 5 s handler
            signalled = time.monotonic()
            worker.signal(signal.SIGTERM)
            try:
                code = worker.wait(timeout=4)  # the handler alone would need ~5 s
            except subprocess.TimeoutExpired:
                raise AssertionError(
                    f"still running 4 s after SIGTERM with a 0.5 s grace: {worker.describe()}"
                ) from None
            took = time.monotonic() - signalled
            event = event_row(store, "evt_1")
            assert code == 1, worker.describe()
            assert took < 3, f"took {took:.1f} s to exit"
            assert (event.status, event.attempts, event.outcome) == ("processing", 1, None)
            assert not _applied(store, "evt_1"), "the cut-off attempt's writes were committed"
            assert not read_all(store, sa.select(orders.orders.c.id))
            time.sleep(max(0.0, 5.5 - (time.monotonic() - signalled)))  # past the handler's own end
            assert event_row(store, "evt_1").status == "processing"
            assert not _applied(store, "evt_1"), "the cut-off attempt committed after exit"
            print(f"\nexited 1 {took:.1f} s after SIGTERM")
    finally:
        inbox.close()
        worker.close()
