"""A pause committed while a real worker process holds a leased batch: once `pause` has
returned, no attempt at one of the source's events starts (no handler's write commits), the
batch the worker held is given back uncounted, and after `resume` every event is processed
exactly once."""

from __future__ import annotations

import time
from collections import Counter
from datetime import UTC, datetime

import sqlalchemy as sa

from hookinbox._operations._service import Operations
from hookinbox._records import Actor
from tests.apps import orders
from tests.support.workers import (
    WorkerProcess,
    ingest_checkouts,
    opened_store,
    read_all,
    status_counts,
    wait_for,
)

EVENTS = 40


def test_nothing_starts_after_the_pause_and_resume_processes_each_once(db_url: str) -> None:
    orders.create_tables(db_url)
    ingest_checkouts(db_url, range(1, EVENTS + 1))
    applied = sa.select(orders.applied_checkouts.c.event_id)
    # Each attempt holds its transaction 0.2 s; two slots, the lease holds the rest in memory.
    worker = WorkerProcess(db_url, "--concurrency", "2", env={"ORDERS_HANDLER_SLEEP": "0.2"})
    try:
        with opened_store(db_url) as store:
            operations = Operations(store)
            wait_for(
                lambda: len(read_all(store, applied)) >= 3,
                timeout=30,
                what="the worker to process a few events",
                describe=worker.describe,
            )
            held = status_counts(store).get("processing", 0)
            change = operations.pause("stripe", datetime.now(UTC), actor=Actor("test"))
            after_pause = len(read_all(store, applied))
            assert after_pause < EVENTS, "all processed before the pause: nothing was tested"
            # Parked by the pause, or by the worker's next lease (which reads the pause).
            assert change.events <= EVENTS - after_pause
            # Long enough for the worker to run ~20 more attempts were it not paused.
            time.sleep(2.5)
            assert worker.running(), worker.describe()
            assert len(read_all(store, applied)) == after_pause, "processed after the pause"
            counts = status_counts(store)
            assert counts == {"processed": after_pause, "paused": EVENTS - after_pause}, counts
            print(f"\n{held} held by the worker at the pause; {after_pause} processed before it")

            operations.resume("stripe", datetime.now(UTC), actor=Actor("test"))
            wait_for(
                lambda: status_counts(store) == {"processed": EVENTS},
                timeout=60,
                what="every event processed after the resume",
                describe=worker.describe,
            )
            per_event = Counter(row.event_id for row in read_all(store, applied))
            assert len(per_event) == EVENTS and set(per_event.values()) == {1}
            attempts = read_all(store, sa.select(sa.text("attempts FROM hookinbox_events")))
            assert {row.attempts for row in attempts} == {1}  # the parked lease cost nothing
    finally:
        worker.close()
