"""`hookinbox serve` wakes its worker process after each commit instead of leaving the event
to the worker's poll: on SQLite a datagram from the HTTP processes to a socket the worker
binds, on PostgreSQL LISTEN/NOTIFY.

The worker's poll is set to 30 s (`$HOOKINBOX_POLL_INTERVAL`, which serve's worker reads) and
each event must be processed within 10 s of its 200, well after the worker's first poll: only
a wake-up can explain that. Latency itself is measured in bench/, not asserted here.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import sqlalchemy as sa

from hookinbox._storage import Store
from hookinbox._storage._schema import workers
from tests.apps import orders
from tests.support.server import free_port, hookinbox_command, serving
from tests.support.signing import stripe_delivery
from tests.support.workers import APP, checkout_event, event_row, opened_store, read_all, wait_for

LONG_POLL = 30.0
WOKEN_WITHIN = 10.0
SETTLE = 0.5
"""Seconds for a worker that just started to finish its first poll and go idle."""


@contextmanager
def serving_with_long_poll(db_url: str, *, workers: int = 1) -> Iterator[str]:
    port = free_port()
    command = hookinbox_command(
        "serve", APP, "--database-url", db_url, "--port", str(port),
        "--workers", str(workers), "--log-level", "warning",
    )  # fmt: skip
    with serving(command, port, env={"HOOKINBOX_POLL_INTERVAL": f"{LONG_POLL:g}"}) as base_url:
        yield base_url


def post_checkout(base_url: str, number: int) -> None:
    headers, body = stripe_delivery(checkout_event(number), orders.STRIPE_SECRET)
    response = httpx.post(f"{base_url}/webhooks/stripe", headers=headers, content=body, timeout=10)
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "accepted"


def wait_processed(store: Store, number: int) -> float:
    return wait_for(
        lambda: event_row(store, f"evt_{number}").status == "processed",
        timeout=WOKEN_WITHIN,
        interval=0.02,
        what=f"serve's worker to process evt_{number} (its poll is {LONG_POLL:g} s: not woken?)",
        describe=lambda: str(dict(event_row(store, f"evt_{number}"))),
    )


def worker_pids(store: Store) -> set[int]:
    """The pids of the worker processes that have beaten (a killed one's row stays)."""
    return {int(row.pid) for row in read_all(store, sa.select(workers.c.pid))}


def wait_for_new_worker(store: Store, known: set[int]) -> int:
    """The pid of a worker that started after `known` did, once it has bound its socket (it
    binds before its first heartbeat) and gone idle."""
    wait_for(
        lambda: bool(worker_pids(store) - known),
        timeout=30,
        what="serve's worker to start",
    )
    [pid] = worker_pids(store) - known
    time.sleep(SETTLE)
    return pid


def test_each_commit_wakes_serves_worker(db_url: str) -> None:
    """Two HTTP processes: whichever takes a delivery wakes the one worker."""
    orders.create_tables(db_url)
    with opened_store(db_url) as store:
        with serving_with_long_poll(db_url, workers=2) as base_url:
            wait_for_new_worker(store, set())
            for number in range(4):
                post_checkout(base_url, number)
                wait_processed(store, number)
        assert event_row(store, "evt_3").outcome == "handled"


def test_a_killed_and_restarted_worker_is_woken_again(db_url: str) -> None:
    orders.create_tables(db_url)
    with opened_store(db_url) as store:
        with serving_with_long_poll(db_url) as base_url:
            first = wait_for_new_worker(store, set())
            post_checkout(base_url, 1)
            wait_processed(store, 1)

            os.kill(first, signal.SIGKILL)  # no clean-up: its socket file stays behind
            second = wait_for_new_worker(store, {first})  # serve restarts it (0.5 s backoff)
            assert second != first
            post_checkout(base_url, 2)
            wait_processed(store, 2)
            [applied] = read_all(
                store,
                sa.select(orders.applied_checkouts.c.worker_pid).where(
                    orders.applied_checkouts.c.event_id == "evt_2"
                ),
            )
            assert applied.worker_pid == second
