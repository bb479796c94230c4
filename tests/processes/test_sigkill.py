"""Chaos: SIGKILL random workers at random moments while 1,000 events are processed.

A killed worker leaves events `processing` with a lease that expires after 1 s; its open
processing transaction dies with it (rolled back). The sweeper in the other workers (or in the
restarted one) gives those events back, and they are tried again. Nothing may be applied twice
and nothing may be lost or failed.
"""

from __future__ import annotations

import random
import signal
import time
from collections import Counter

import sqlalchemy as sa

from hookinbox._storage._schema import events
from tests.apps import orders
from tests.support.workers import (
    Workers,
    ingest_checkouts,
    opened_store,
    read_all,
    status_counts,
    wait_for,
)

EVENTS = 1000
WORKERS = 3
SEED = 20261129
CHAOS_DEADLINE = 120.0
MIN_KILLS = 5
# The chaos stops after this many kills; the workers then left must finish. Without a cap, a
# loaded machine (slow worker start-ups) can kill workers faster than they get anything done.
MAX_KILLS = 40
ENV = {
    "ORDERS_HANDLER_SLEEP": "0.005",
    "ORDERS_MAX_ATTEMPTS": "100",
    "ORDERS_FIRST_DELAY": "0.05",  # a killed attempt is retried soon after its lease is swept
}


def test_sigkilled_workers_never_apply_an_event_twice(db_url: str) -> None:
    orders.create_tables(db_url)
    ingest_checkouts(db_url, range(EVENTS))
    rng = random.Random(SEED)
    kills = 0
    with opened_store(db_url) as store, Workers(db_url, "--lease-seconds", "1", env=ENV) as workers:

        def processed() -> int:
            return status_counts(store).get("processed", 0)

        workers.start(WORKERS)
        started = time.monotonic()
        while processed() < EVENTS:
            assert time.monotonic() - started < CHAOS_DEADLINE, (
                f"not processed within {CHAOS_DEADLINE} s ({kills} kills): "
                f"{status_counts(store)}\n{workers.describe()}"
            )
            time.sleep(rng.uniform(0.2, 0.8))
            workers.check_alive()
            if processed() >= EVENTS or kills >= MAX_KILLS:
                continue
            # Only a worker whose loop runs can be cut mid-attempt: on a loaded machine a
            # start-up takes seconds, and kills of workers still importing proved nothing.
            working = [each for each in workers.live if each.handles_sigterm()]
            if not working:
                continue
            victim = rng.choice(working)
            code = victim.kill()
            assert code == -signal.SIGKILL, victim.describe()
            workers.retire(victim)
            kills += 1
            workers.start(1)
        chaos = time.monotonic() - started
        print(f"\n{kills} SIGKILLs (seed {SEED}); all {EVENTS} events processed in {chaos:.1f} s")

        assert status_counts(store) == {"processed": EVENTS}
        codes = workers.terminate_all(timeout=30)
        assert set(codes.values()) == {0}, f"exit codes {codes}\n{workers.describe()}"

        event_rows = read_all(
            store, sa.select(events.c.event_id, events.c.outcome, events.c.attempts)
        )
        applied = [
            r.event_id for r in read_all(store, sa.select(orders.applied_checkouts.c.event_id))
        ]
        order_count = len(read_all(store, sa.select(orders.orders.c.id)))

    assert kills >= MIN_KILLS, f"only {kills} kills happened: the chaos proved little"
    expected = {f"evt_{n}" for n in range(EVENTS)}
    assert {r.event_id for r in event_rows} == expected
    doubled = sorted(e for e, n in Counter(applied).items() if n > 1)
    assert not doubled, f"applied more than once: {doubled[:10]} ({len(doubled)} events)"
    assert {r.outcome for r in event_rows} == {"handled"}
    assert set(applied) == expected and len(applied) == EVENTS
    assert order_count == EVENTS
    # The kills must have cut attempts short, or they proved nothing about recovery.
    retried = [r for r in event_rows if r.attempts > 1]
    print(f"{len(retried)} events needed more than one attempt")
    assert retried, "no event needed a second attempt: no kill hit an attempt in flight"


def test_a_worker_killed_in_the_middle_of_a_batch_loses_and_doubles_nothing(db_url: str) -> None:
    """One worker, concurrency 2: it leases 4 events at a time and its threads take them one
    by one (2 s each). SIGKILL once the first batch is partly done: the events it held but had
    not started, and the ones cut off mid-attempt, stay `processing` until their lease expires;
    a second worker sweeps them back and applies each once."""
    orders.create_tables(db_url)
    ingest_checkouts(db_url, range(8))
    env = {**ENV, "ORDERS_HANDLER_SLEEP": "2"}
    args = ("--lease-seconds", "3", "--concurrency", "2")
    with opened_store(db_url) as store, Workers(db_url, *args, env=env) as workers:
        [first] = workers.start(1)
        wait_for(
            lambda: status_counts(store).get("processed", 0) >= 1,
            timeout=60,
            what="the first events of the batch to be processed",
            describe=first.describe,
        )
        held = status_counts(store).get("processing", 0)
        assert first.kill() == -signal.SIGKILL, first.describe()
        workers.retire(first)
        at_kill = status_counts(store)
        assert held >= 2 and at_kill.get("processing", 0) >= 2, at_kill  # a batch was held
        workers.start(1)
        wait_for(
            lambda: status_counts(store) == {"processed": 8},
            timeout=120,
            what="every event processed after the kill",
            describe=workers.describe,
        )
        codes = workers.terminate_all(timeout=30)
        assert set(codes.values()) == {0}, workers.describe()
        rows = read_all(store, sa.select(events.c.event_id, events.c.attempts))
        applied = [
            r.event_id for r in read_all(store, sa.select(orders.applied_checkouts.c.event_id))
        ]
    assert sorted(applied) == sorted(f"evt_{n}" for n in range(8))  # each once
    assert any(row.attempts > 1 for row in rows), rows  # the kill cut some short
