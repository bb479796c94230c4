"""Processing an event updates its rows in place on PostgreSQL (heap-only tuples), issue 37.

PostgreSQL writes an updated row's new version on the same page without touching any index
(HOT) when no indexed column changes and the page has room. Schema 9 keeps the columns that
change while an event is in flight out of the indexes of `hookinbox_events` (the narrow queue
table has them); the fill factors leave the room (docs/storage.md, "Claims that stay
heap-only"). Until schema 9 none of processing's updates were heap-only; with schema 9's
first fill factors (85 % for the events) about half of the events' final updates were not,
because two workers' overlapping transactions keep the page's previous versions from being
pruned in time.

Real worker processes drain a backlog of events the size of a small Stripe event (~1 KB a
row), and the table statistics PostgreSQL keeps (`pg_stat_user_tables`, flushed when the
workers' sessions end) must show at least 90 % of the row updates heap-only, on each table.
Schema 10 sets the fill factors that give that room; on a filled inbox it changes the catalog
only, so an operator can run it on a large inbox while deliveries go on.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import sqlalchemy as sa

from hookinbox._storage import LATEST_VERSION, Store, _migrations
from tests.apps import orders
from tests.storage._old_events import EVENTS_13
from tests.storage.test_schema_9 import _event as old_event
from tests.support.workers import (
    ACTIVE,
    Workers,
    checkout_event,
    deliver,
    opened_store,
    status_counts,
    wait_for,
)

EVENTS = 600
WORKERS = 2
PADDING = "x" * 600  # a checkout's row grows to ~1 KB, as a small Stripe event's does


def _updates(
    store: Store, tables: tuple[str, ...] = ("hookinbox_events", "hookinbox_event_queue")
) -> dict[str, tuple[int, int]]:
    """(row updates, of which heap-only) per hookinbox table, as PostgreSQL counted them."""
    query = sa.text(
        "SELECT relname, n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname IN :tables"
    ).bindparams(sa.bindparam("tables", expanding=True))
    with store.engine.connect() as connection:
        connection.exec_driver_sql("SELECT pg_stat_clear_snapshot()")
        rows = connection.execute(query, {"tables": list(tables)}).all()
        connection.rollback()
    return {str(name): (int(updated), int(hot)) for name, updated, hot in rows}


@pytest.mark.parametrize("backend", ["postgres"])
def test_processing_updates_stay_heap_only(db_url: str) -> None:
    orders.create_tables(db_url)
    inbox = orders.build(db_url, ack_deadline=None)
    try:
        for number in range(EVENTS):
            event: dict[str, Any] = checkout_event(number)
            event["data"]["object"]["metadata"] = {"note": PADDING}
            assert deliver(inbox, event)[0] == "accepted"
    finally:
        inbox.close()

    with opened_store(db_url) as store, Workers(db_url, "--concurrency", "4") as workers:
        assert _updates(store)["hookinbox_events"][0] == 0  # ingest inserts, it updates nothing
        workers.start(WORKERS)
        wait_for(
            lambda: not any(status_counts(store).get(status) for status in ACTIVE),
            timeout=120,
            what="every event to be processed",
            describe=lambda: f"statuses: {status_counts(store)}\n{workers.describe()}",
            check=workers.check_alive,
            interval=0.25,
        )
        assert status_counts(store) == {"processed": EVENTS}
        codes = workers.terminate_all(timeout=30)
        assert set(codes.values()) == {0}, f"exit codes {codes}\n{workers.describe()}"

        # A session's counts reach the statistics when it ends: the workers' have just ended.
        deadline = time.monotonic() + 20
        while (counts := _updates(store))["hookinbox_events"][0] < EVENTS:
            assert time.monotonic() < deadline, f"statistics never counted the drain: {counts}"
            time.sleep(0.1)

    print(f"\nrow updates (all, heap-only) of a drain of {EVENTS} events: {counts}")
    for table, (updated, hot) in counts.items():
        assert updated >= EVENTS, f"{table}: {updated} updates for {EVENTS} events"
        assert hot >= 0.9 * updated, f"{table}: {hot} of {updated} updates heap-only"


def _table_files(store: Store) -> dict[str, tuple[int, list[str]]]:
    query = sa.text(
        "SELECT relname, relfilenode, coalesce(reloptions, '{}') FROM pg_class"
        " WHERE relname IN ('hookinbox_events', 'hookinbox_event_queue')"
    )
    with store.engine.connect() as connection:
        return {
            str(name): (int(node), list(options))
            for name, node, options in connection.execute(query)
        }


@pytest.mark.parametrize("backend", ["postgres"])
def test_schema_10_gives_the_room_without_rewriting_a_table(empty_db_url: str) -> None:
    # A lock that stopped deliveries would wait behind the one held below: fail, don't hang.
    store = Store(f"{empty_db_url}?options=-c%20lock_timeout%3D5000", auto_migrate=False)
    try:
        _migrations.migrate(store.engine, target=9)
        with store.engine.begin() as connection:  # events of schema 9, pending and done
            connection.execute(EVENTS_13.insert(), [
                old_event(f"evt_{n}", "pending" if n % 2 else "processed") for n in range(50)
            ])  # fmt: skip
        before = _table_files(store)
        assert before["hookinbox_events"][1] == ["fillfactor=85"]
        # Deliveries go on while it runs: it takes no lock that stops them.
        with store.engine.connect() as delivering:
            delivering.execute(sa.text("LOCK TABLE hookinbox_events IN ROW EXCLUSIVE MODE"))
            assert _migrations.migrate(store.engine, target=10) == (9, 10)
            delivering.rollback()
        after = _table_files(store)
    finally:
        store.dispose()
    assert after == {
        "hookinbox_events": (before["hookinbox_events"][0], ["fillfactor=50"]),
        "hookinbox_event_queue": (before["hookinbox_event_queue"][0], ["fillfactor=30"]),
    }


@pytest.mark.parametrize("backend", ["postgres"])
def test_schema_11_adds_received_via_without_rewriting_a_table(empty_db_url: str) -> None:
    store = Store(empty_db_url, auto_migrate=False)
    try:
        _migrations.migrate(store.engine, target=10)
        with store.engine.begin() as connection:
            connection.execute(EVENTS_13.insert(), [old_event(f"evt_{n}", "processed")
                                                 for n in range(50)])  # fmt: skip
        before = _table_files(store)
        assert store.migrate() == (10, LATEST_VERSION)
        after = _table_files(store)
        with store.engine.connect() as connection:
            arrivals = connection.execute(
                sa.text("SELECT DISTINCT received_via FROM hookinbox_events")
            )
            assert [row[0] for row in arrivals] == ["webhook"]
    finally:
        store.dispose()
    assert after == before  # the same files: a catalog change, no rewrite
