"""A poison event kills its worker on every attempt; it must still run out of attempts.

The attempt is counted when the event is leased, in its own committed transaction, before the
handler runs. So a worker that dies mid-attempt has used the attempt; the sweeper returns the
event once the 1 s lease expires, and after ORDERS_MAX_ATTEMPTS=3 deaths it is `failed` with
outcome `worker_lost` instead of killing workers forever.
"""

from __future__ import annotations

import time

import sqlalchemy as sa

from tests.apps import orders
from tests.support.workers import (
    Workers,
    checkout_event,
    deliver,
    event_row,
    opened_store,
    poison_event,
    read_all,
    status_counts,
    wait_for,
)

MAX_ATTEMPTS = 3
POISON_EXIT = 17
MAX_RESTARTS = 10
DEADLINE = 60.0
LEASE = 1.0
ENV = {"ORDERS_MAX_ATTEMPTS": str(MAX_ATTEMPTS), "ORDERS_FIRST_DELAY": "0.1"}


def test_a_poison_event_fails_after_max_attempts_deaths(db_url: str) -> None:
    orders.create_tables(db_url)
    inbox = orders.build(db_url)
    try:
        deliver(inbox, checkout_event(1))
        deliver(inbox, poison_event("evt_poison"))
        for number in (2, 3):
            deliver(inbox, checkout_event(number))
    finally:
        inbox.close()

    args = ("--concurrency", "1", "--lease-seconds", str(LEASE))
    deaths: list[int] = []
    with opened_store(db_url) as store, Workers(db_url, *args, env=ENV) as workers:

        def poison_failed() -> bool:
            return bool(event_row(store, "evt_poison").status == "failed")

        [worker] = workers.start()
        started = time.monotonic()
        # A supervisor, like systemd with Restart=on-failure: restart the worker when it dies.
        while not poison_failed():
            elapsed = time.monotonic() - started
            assert elapsed < DEADLINE, (
                f"poison event not failed after {elapsed:.0f} s and {len(deaths)} deaths:"
                f" {dict(event_row(store, 'evt_poison'))}\n{workers.describe()}"
            )
            if worker.running():
                time.sleep(0.05)
                continue
            deaths.append(worker.wait(0))
            workers.retire(worker)
            assert len(deaths) <= MAX_RESTARTS, f"died {deaths}; {workers.describe()}"
            # Restart once the dead worker's lease has expired, so the new worker's first
            # sweep finds the event (sweeps are 5 s apart after that).
            time.sleep(LEASE + 0.2)
            [worker] = workers.start()

        wait_for(
            lambda: status_counts(store) == {"processed": 3, "failed": 1},
            timeout=20,
            what="the three checkouts to be processed",
            describe=lambda: f"statuses: {status_counts(store)}\n{workers.describe()}",
            check=workers.check_alive,
        )
        codes = workers.terminate_all(timeout=15)
        poison = event_row(store, "evt_poison")
        applied = read_all(store, sa.select(orders.applied_checkouts.c.event_id))
        order_count = len(read_all(store, sa.select(orders.orders.c.id)))

    print(f"\nworker exit codes: {deaths}; failed in {time.monotonic() - started:.1f} s")
    # One death per attempt, no more: the third expired lease fails the event in the sweeper.
    assert deaths == [POISON_EXIT] * MAX_ATTEMPTS, f"deaths {deaths}"
    assert list(codes.values()) == [0], codes
    assert poison.status == "failed"
    assert poison.outcome == "worker_lost"
    assert poison.attempts == MAX_ATTEMPTS
    assert "worker lost" in (poison.last_error or "")
    assert sorted(r.event_id for r in applied) == ["evt_1", "evt_2", "evt_3"]
    assert order_count == 3
