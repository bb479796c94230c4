"""A frozen PostgreSQL (every server process stopped with SIGSTOP) is answered 503 in time.

A database that stops answering without closing anything (a stalled disk, a VM paused, a
server swapping) is worse than one that is down: connections stay open, nothing is refused,
and without a deadline every request would wait as long as the stall. Here a real
`hookinbox serve` of the example shop runs against a throwaway cluster (`_cluster.py`); the
test freezes all of the cluster's processes for longer than the ack deadline while deliveries
arrive, then thaws them.

It proves: each delivery during the freeze is answered 503 with Retry-After within the ack
deadline (plus a margin for a busy machine), never 200 and never left hanging; after the
thaw /readyz answers 200 again by itself; the provider's retries are all answered 200 (as
duplicates for deliveries whose write went through after their 503); and each event is
processed exactly once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import httpx
import pytest
import sqlalchemy as sa

from hookinbox._settings import DEFAULT_ACK_DEADLINE
from hookinbox._storage import Store
from hookinbox._storage._schema import events
from tests.reliability._cluster import PostgresCluster
from tests.reliability._load import (
    SHOP_SECRET,
    outcome_counts,
    ready,
    serve_command,
    wait_until,
)
from tests.reliability._report import Trial, record
from tests.support.server import free_port, serving_process
from tests.support.signing import stripe_delivery, stripe_event

pytestmark = pytest.mark.postgres

FROZEN_FOR = DEFAULT_ACK_DEADLINE + 3.0
"""Seconds the cluster stays frozen: past the deadline of every delivery sent meanwhile."""
DELIVERIES = 10
SPACING = 0.3
MARGIN = 2.5
"""Seconds over the deadline allowed for scheduling on a busy 2-core machine."""


def cluster_processes(cluster: PostgresCluster) -> list[int]:
    """The postmaster and every process it started (backends, checkpointer, WAL writer...)."""
    postmaster = int((cluster.data / "postmaster.pid").read_text().split()[0])
    found = subprocess.run(
        ["pgrep", "-P", str(postmaster)], capture_output=True, text=True, check=False
    )
    return [postmaster, *(int(pid) for pid in found.stdout.split())]


@contextmanager
def frozen(cluster: PostgresCluster) -> Iterator[None]:
    pids = cluster_processes(cluster)
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)


def deliver(url: str, number: int) -> tuple[httpx.Response, float]:
    event = stripe_event(f"evt_frozen_{number}", payment_intent=f"pi_frozen_{number}")
    headers, body = stripe_delivery(event, SHOP_SECRET)
    started = time.monotonic()
    response = httpx.post(url, headers=headers, content=body, timeout=60)
    return response, time.monotonic() - started


def processed(database_url: str) -> dict[str, int]:
    """Status counts of the test's own events."""
    store = Store(database_url, auto_migrate=False)
    query = (
        sa.select(events.c.status, sa.func.count())
        .where(events.c.event_id.like("evt_frozen_%"))
        .group_by(events.c.status)
    )
    try:
        with store.reading() as connection:
            return {str(status): int(count) for status, count in connection.execute(query)}
    finally:
        store.dispose()


def orders_per_payment(database_url: str) -> dict[str, int]:
    engine = sa.create_engine(database_url.replace("postgresql://", "postgresql+psycopg://", 1))
    query = sa.text(
        "SELECT payment_id, count(*) FROM shop_orders "
        "WHERE payment_id LIKE 'pi_frozen_%' GROUP BY payment_id"
    )
    try:
        with engine.connect() as connection:
            return {str(payment): int(count) for payment, count in connection.execute(query)}
    finally:
        engine.dispose()


def test_a_frozen_database_is_answered_503_within_the_ack_deadline(
    cluster: PostgresCluster,
) -> None:
    database_url = cluster.create_database("hookinbox")
    port = free_port()
    with serving_process(serve_command(database_url, port), port) as (_, base_url):
        target = f"{base_url}/webhooks/stripe"
        assert deliver(target, DELIVERIES)[0].status_code == 200  # connections are open

        with frozen(cluster), ThreadPoolExecutor(max_workers=DELIVERIES) as pool:
            started = time.monotonic()
            futures = []
            for number in range(DELIVERIES):
                futures.append(pool.submit(deliver, target, number))
                time.sleep(SPACING)
            answers = [future.result() for future in futures]
            time.sleep(max(0.0, FROZEN_FOR - (time.monotonic() - started)))

        statuses = [response.status_code for response, _ in answers]
        slowest = max(seconds for _, seconds in answers)
        assert statuses == [503] * DELIVERIES, [r.text for r, _ in answers]
        assert all(response.headers.get("retry-after") for response, _ in answers)
        assert slowest < DEFAULT_ACK_DEADLINE + MARGIN, f"slowest 503 took {slowest:.2f} s"

        recovery = wait_until(
            lambda: ready(base_url) == 200, timeout=30, what="/readyz 200 after the thaw"
        )
        time.sleep(1.0)  # writes that waited on the frozen server finish (or fail) now
        retries = [deliver(target, number)[0] for number in range(DELIVERIES)]
        assert [response.status_code for response in retries] == [200] * DELIVERIES
        late = sum(response.json()["status"] == "duplicate" for response in retries)

        wait_until(
            lambda: processed(database_url).get("processed", 0) == DELIVERIES + 1,
            timeout=60,
            what="every event processed",
        )
        orders = orders_per_payment(database_url)
        outcomes = outcome_counts(database_url)
    # The shop's UNIQUE payment_id keeps a second application to one row; a handler that ran
    # again for an applied effect would show as a `business_duplicate` outcome instead.
    doubled = sum(count - 1 for count in orders.values()) + outcomes.get("business_duplicate", 0)
    lost = DELIVERIES + 1 - len(orders)
    assert (lost, doubled) == (0, 0), orders
    record(
        Trial(
            fault="PostgreSQL frozen (SIGSTOP) past the ack deadline",
            backend="postgres",
            deliveries=1 + 2 * DELIVERIES,
            lost=lost,
            doubled=doubled,
            detail=f"{DELIVERIES}x 503 with Retry-After, slowest {slowest:.2f} s; ready "
            f"{recovery:.1f} s after the thaw; {late} stored after their 503, retried as "
            "duplicates",
        )
    )
