"""Wake-ups: an idle worker starts on a new event at once, not at its next poll.

Each test gives the worker a 30 s poll interval and a 10 s deadline, so only the wake-up
mechanism under test can explain the event being processed in time. Latency itself is
measured in the benchmarks, not asserted here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from hookinbox import Inbox, Status, WorkerOptions
from tests.apps import orders as orders_app
from tests.processing.conftest import checkout
from tests.support.signing import stripe_delivery

LONG_POLL = 30.0


@contextmanager
def running_worker(inbox: Inbox, poll_interval: float) -> Iterator[None]:
    options = WorkerOptions(concurrency=2, poll_interval=poll_interval, handle_signals=False)
    worker = inbox.worker(options)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    time.sleep(0.3)  # let it reach its idle wait
    try:
        yield
    finally:
        worker.stop()
        thread.join(timeout=10)
        assert not thread.is_alive()


def wait_processed(inbox: Inbox, event_id: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        event = inbox.store.get_event("stripe", event_id)
        if event is not None and event.status is Status.PROCESSED:
            return
        time.sleep(0.02)
    raise AssertionError(f"{event_id} was not processed within {timeout} s")


def deliver(inbox: Inbox, number: int) -> None:
    headers, body = stripe_delivery(checkout(number), orders_app.STRIPE_SECRET)
    assert inbox.receive("stripe", headers, body).body["status"] == "accepted"


def test_ingest_in_the_same_process_wakes_the_worker(db_url: str) -> None:
    orders_app.create_tables(db_url)
    inbox = orders_app.build(db_url)
    with running_worker(inbox, LONG_POLL):
        for number in range(3):
            deliver(inbox, number)
            wait_processed(inbox, f"evt_{number}")
    inbox.close()


def test_ingest_in_another_process_wakes_the_worker(db_url: str, backend: str) -> None:
    """Two Inbox objects share nothing but the database, as two processes would.

    PostgreSQL wakes the worker with LISTEN/NOTIFY even with a 30 s poll; SQLite has no
    notification channel, so there the worker relies on its default 50 ms poll.
    """
    orders_app.create_tables(db_url)
    receiving, working = orders_app.build(db_url), orders_app.build(db_url)
    poll = LONG_POLL if backend == "postgres" else 0.05
    with running_worker(working, poll):
        for number in range(3):
            deliver(receiving, number)
            wait_processed(working, f"evt_{number}")
    receiving.close()
    working.close()
