"""A deadlock on PostgreSQL, made for real: hookinbox's own transaction is the victim, and it
runs again before anyone hears of it.

PostgreSQL aborts the session that finds the cycle, which is the first whose wait outlasts
its `deadlock_timeout` (1 s by default): the rival session here waits 30 s before it looks,
so hookinbox's always finds it first. Reconcile's page inserts evt_a then evt_b in one
transaction (key order); the rival has inserted evt_b and, once the page waits for it,
inserts evt_a: a cycle. The page's transaction is aborted (40P01), `Store.retry_deadlocks`
runs it again, and once the rival gives up its rows the page stores both events, as if
nothing had happened. `pg_stat_database.deadlocks` says the deadlock took place: the test
cannot pass without one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
import sqlalchemy as sa
from sqlalchemy import Connection

from hookinbox._storage import Store
from hookinbox._storage._ingest import _reconciled_row, reconciled_insert
from hookinbox._storage._schema import events
from tests.storage.test_deliveries import delivery
from tests.support.innodb import retries

pytestmark = pytest.mark.parametrize("backend", ["postgres"])

RIVAL_DEADLOCK_TIMEOUT = "30s"
"""The rival looks for a cycle only after this long: hookinbox's session (1 s) finds it
first and is the one PostgreSQL aborts."""


def deadlocks(store: Store) -> int:
    with store.engine.connect() as connection:
        found = connection.exec_driver_sql(
            "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"
        ).scalar_one()
    return int(found)


def waiting_for_a_lock(store: Store, besides: int) -> bool:
    with store.engine.connect() as connection:
        waiting = connection.exec_driver_sql(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            f" AND wait_event_type = 'Lock' AND pid <> {int(besides)}"
        ).scalar_one()
    return int(waiting) > 0


def poll(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.02)


@pytest.fixture
def rival(store: Store) -> Iterator[Connection]:
    """A session of the test's own, in a transaction, slow to look for deadlocks."""
    with store.engine.connect() as connection:
        # LOCAL: until the transaction ends, so the pooled session is left as it was.
        connection.exec_driver_sql(f"SET LOCAL deadlock_timeout = '{RIVAL_DEADLOCK_TIMEOUT}'")
        yield connection
        connection.rollback()


def insert(connection: Connection, store: Store, event_id: str) -> None:
    row = _reconciled_row(delivery(event_id, body=b"{}"))
    connection.execute(reconciled_insert(store.dialect), row)


def test_a_page_chosen_as_a_deadlock_victim_is_written_again(
    store: Store, rival: Connection
) -> None:
    before, retried = deadlocks(store), retries("reconcile")
    rival_pid = rival.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
    insert(rival, store, "evt_b")
    with ThreadPoolExecutor(2) as pool:
        page = pool.submit(
            store.ingest.record_reconciled, [delivery("evt_b", body=b"{}"), delivery("evt_a")]
        )
        # The page inserted evt_a and waits for the rival's evt_b.
        poll(lambda: waiting_for_a_lock(store, besides=rival_pid), 10, "the page to wait")
        # The rival's evt_a waits for the page: a cycle, which the page finds after 1 s.
        closing = pool.submit(insert, rival, store, "evt_a")
        closing.result(timeout=20)  # the page's first run was aborted: its evt_a is gone
        # Its second run waits for the rival's two rows; the rival gives them up.
        poll(lambda: waiting_for_a_lock(store, besides=rival_pid), 10, "the second run")
        rival.rollback()
        stored = page.result(timeout=20)
    # The victim's session reports its deadlock with its other statistics, within seconds.
    poll(lambda: deadlocks(store) > before, 15, "PostgreSQL to count the deadlock")
    assert deadlocks(store) == before + 1
    assert retries("reconcile") == retried + 1
    assert stored == [True, True]
    with store.engine.connect() as connection:
        kept = connection.execute(sa.select(events.c.event_id).order_by(events.c.event_id))
        assert [row.event_id for row in kept] == ["evt_a", "evt_b"]
