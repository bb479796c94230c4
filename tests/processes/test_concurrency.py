"""2,000 events, each delivered 3 times at once by 3 processes, processed by 4 worker processes.

Ingest and processing overlap: the workers run while the copies arrive. Every event must be
applied exactly once (`applied_checkouts` has no unique constraint, so a double application
would show as a second row), counted as delivered 3 times, and end `processed`/`handled`.
"""

from __future__ import annotations

import multiprocessing
import time
from collections import Counter

import sqlalchemy as sa

from hookinbox._storage._schema import events
from tests.apps import orders
from tests.support.workers import (
    ACTIVE,
    Workers,
    deliver_checkouts,
    opened_store,
    read_all,
    status_counts,
    wait_for,
)

EVENTS = 2000
COPIES = 3
WORKERS = 4


def test_concurrent_duplicates_and_workers_apply_each_event_once(db_url: str) -> None:
    orders.create_tables(db_url)
    numbers = list(range(EVENTS))
    started = time.monotonic()
    with opened_store(db_url) as store, Workers(db_url, "--concurrency", "4") as workers:
        workers.start(WORKERS)
        context = multiprocessing.get_context("spawn")
        with context.Pool(COPIES) as pool:
            ingest = pool.starmap_async(
                deliver_checkouts, [(db_url, numbers, seed) for seed in range(COPIES)]
            )
            while not ingest.ready():  # the deadline for ingest, failing fast if a worker dies
                workers.check_alive()
                assert time.monotonic() - started < 150, "ingest did not finish in 150 s"
                ingest.wait(0.5)
            summaries = ingest.get()
            pool.close()
            pool.join()
        ingested = time.monotonic() - started

        def unfinished() -> dict[str, int]:
            counts = status_counts(store)
            return {s: counts[s] for s in ACTIVE if counts.get(s)}

        wait_for(
            lambda: sum(status_counts(store).values()) == EVENTS and not unfinished(),
            timeout=120,
            what="every event to be processed",
            describe=lambda: f"statuses: {status_counts(store)}\n{workers.describe()}",
            check=workers.check_alive,
            interval=0.25,
        )
        processed = time.monotonic() - started
        codes = workers.terminate_all(timeout=30)
        assert set(codes.values()) == {0}, f"exit codes {codes}\n{workers.describe()}"

        rows = read_all(store, sa.select(orders.applied_checkouts))
        order_rows = read_all(store, sa.select(orders.orders.c.event_id))
        event_rows = read_all(
            store,
            sa.select(
                events.c.event_id, events.c.status, events.c.outcome, events.c.delivery_count
            ),
        )

    print(
        f"\n{EVENTS} events x {COPIES} copies: ingest done in {ingested:.1f} s, all processed"
        f" in {processed:.1f} s; ingest replies {summaries}"
    )
    expected = {f"evt_{n}" for n in numbers}
    assert sum(s.get("accepted", 0) for s in summaries) == EVENTS
    assert sum(s.get("duplicate", 0) for s in summaries) == EVENTS * (COPIES - 1)

    assert len(event_rows) == EVENTS
    assert {r.event_id for r in event_rows} == expected
    not_done = [r for r in event_rows if (r.status, r.outcome) != ("processed", "handled")]
    assert not not_done, f"{len(not_done)} events not processed/handled, e.g. {not_done[:5]}"
    wrong_count = [r for r in event_rows if r.delivery_count != COPIES]
    assert not wrong_count, f"delivery_count != {COPIES}: {wrong_count[:5]}"

    applied = [r.event_id for r in rows]
    doubled = sorted(e for e, n in Counter(applied).items() if n > 1)
    assert not doubled, f"applied more than once: {doubled[:10]} ({len(doubled)} events)"
    assert len(applied) == EVENTS
    assert set(applied) == expected
    assert len(order_rows) == EVENTS
    assert {r.event_id for r in order_rows} == expected

    pids = {r.worker_pid for r in rows}
    assert len(pids) > 1, f"only worker {pids} applied events: no concurrency happened"
    assert pids <= set(codes), f"applied by pids {pids - set(codes)} that are not our workers"
