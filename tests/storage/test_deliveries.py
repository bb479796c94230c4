"""Recording deliveries: one row per (source, event id), counted, on both backends."""

from __future__ import annotations

import dataclasses
import hashlib
import multiprocessing
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from hookinbox._model import NewDelivery, Status
from hookinbox._storage import Store
from hookinbox._storage._schema import events


def delivery(
    event_id: str = "evt_1", body: bytes = b'{"id": "evt_1"}', **changes: object
) -> NewDelivery:
    base = NewDelivery(
        source="stripe",
        event_id=event_id,
        event_type="checkout.session.completed",
        occurred_at=datetime(2026, 1, 1, tzinfo=UTC),
        received_at=datetime.now(UTC),
        body=body,
        headers={"stripe-signature": "t=1,v1=00"},
        body_sha256=hashlib.sha256(body).hexdigest(),
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_first_delivery_creates_a_pending_event(store: Store) -> None:
    recorded = store.ingest.record(delivery())
    assert recorded.is_new and recorded.delivery_count == 1 and not recorded.key_conflict
    event = store.get_event("stripe", "evt_1")
    assert event is not None
    assert event.status is Status.PENDING
    assert event.body == b'{"id": "evt_1"}'
    assert event.payload == {"id": "evt_1"}
    assert event.type == "checkout.session.completed"
    assert event.occurred_at == datetime(2026, 1, 1, tzinfo=UTC)
    assert event.headers == {"stripe-signature": "t=1,v1=00"}
    assert event.attempts == 0


def test_later_deliveries_are_counted_not_stored(store: Store) -> None:
    first = store.ingest.record(delivery())
    later = store.ingest.record(delivery(received_at=datetime.now(UTC) + timedelta(seconds=5)))
    again = store.ingest.record(delivery())
    assert not later.is_new and not again.is_new
    assert later.row_id == first.row_id == again.row_id
    assert again.delivery_count == 3
    with store.engine.connect() as connection:
        rows = connection.execute(
            sa.select(events.c.delivery_count, events.c.last_delivery_at, events.c.received_at)
        ).all()
    assert len(rows) == 1
    count, last_delivery_at, received_at = rows[0]
    assert count == 3 and last_delivery_at >= received_at


def test_same_key_different_body_is_a_duplicate_and_a_key_conflict(store: Store) -> None:
    store.ingest.record(delivery())
    other = delivery(body=b'{"id": "evt_1", "amount": 2}')
    recorded = store.ingest.record(other)
    assert not recorded.is_new and recorded.key_conflict
    stored = store.get_event("stripe", "evt_1")
    assert stored is not None and stored.body == b'{"id": "evt_1"}'  # the first body stays
    with store.engine.connect() as connection:
        assert connection.execute(sa.select(events.c.key_conflicts)).scalar_one() == 1


def test_the_key_is_scoped_by_source(store: Store) -> None:
    assert store.ingest.record(delivery()).is_new
    assert store.ingest.record(delivery(source="shopify")).is_new


def _deliver_many(
    url: str,
    count: int,
    barrier: multiprocessing.synchronize.Barrier,
    results: multiprocessing.Queue[bool],
) -> None:
    store = Store(url)
    barrier.wait()
    for _ in range(count):
        results.put(store.ingest.record(delivery()).is_new)
    store.dispose()


@pytest.mark.slow  # processes: `make test`, not `make test-fast`
def test_concurrent_processes_store_one_event(db_url: str) -> None:
    """Four processes racing the same key: exactly one delivery creates the event."""
    context = multiprocessing.get_context("spawn")
    processes, per_process = 4, 25
    barrier = context.Barrier(processes)
    results: multiprocessing.Queue[bool] = context.Queue()
    workers = [
        context.Process(target=_deliver_many, args=(db_url, per_process, barrier, results))
        for _ in range(processes)
    ]
    for worker in workers:
        worker.start()
    outcomes = [results.get(timeout=60) for _ in range(processes * per_process)]
    for worker in workers:
        worker.join(timeout=30)
        assert worker.exitcode == 0
    assert outcomes.count(True) == 1
    store = Store(db_url)
    event = store.get_event("stripe", "evt_1")
    store.dispose()
    assert event is not None and event.delivery_count == processes * per_process
