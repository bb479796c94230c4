"""The second safety net (business keys) and leases: nothing applied twice, nothing lost."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from hookinbox import ConfigurationError, Event, HandlerContext, Inbox, Status
from hookinbox._processing import BusinessKey
from hookinbox._processing._processor import Processor
from hookinbox._processing._queues import EventQueue
from hookinbox._records import Leased
from hookinbox._storage import Store
from tests.apps.orders import applied_checkouts, orders
from tests.processing.conftest import Deliver, checkout, count, stored
from tests.support.clock import ManualClock


def lease(store: Store, limit: int, now: datetime, until: datetime) -> list[Leased]:
    return store.events.lease(limit=limit, now=now, until=until).fresh


def next_lease(inbox: Inbox) -> list[Leased]:
    """A worker's next lease, which gives back what it finds held past its lease."""
    return EventQueue(processor(inbox), lease_seconds=30).lease(1)


def processor(inbox: Inbox) -> Processor:
    """The inbox's processor, which these tests drive one step at a time."""
    return inbox._runtime.processor


def test_a_business_duplicate_is_processed_not_retried(inbox: Inbox, deliver: Deliver) -> None:
    """Two events with different ids carry the same payment: one order, the second event is
    done with outcome business_duplicate, and its other writes roll back with the savepoint."""
    deliver(checkout(1, payment="pi_same"))
    deliver(checkout(2, payment="pi_same"))
    inbox.process_due()
    first, second = stored(inbox, "evt_1"), stored(inbox, "evt_2")
    assert (first.status, first.outcome) == (Status.PROCESSED, "handled")
    assert (second.status, second.outcome) == (Status.PROCESSED, "business_duplicate")
    assert second.attempts == 1
    assert count(inbox, orders) == 1
    assert count(inbox, applied_checkouts) == 1  # evt_2's first insert rolled back too


def test_an_undeclared_unique_violation_is_a_failure(inbox: Inbox, deliver: Deliver) -> None:
    @inbox.handler("stripe", "charge.succeeded")
    def insert_twice(event: Event, ctx: HandlerContext) -> None:
        ctx.db.execute(orders.insert().values(payment_id="pi_c", event_id=event.id))
        ctx.db.execute(orders.insert().values(payment_id="pi_c", event_id=event.id))

    deliver({**checkout(1), "type": "charge.succeeded"})
    inbox.process_due()
    event = stored(inbox, "evt_1")
    assert event.status is Status.PENDING
    assert event.last_error is not None and "IntegrityError" in event.last_error


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("orders.payment_id", BusinessKey("orders", frozenset({"payment_id"}), None)),
        ("orders(shop_id, number)", BusinessKey("orders", frozenset({"shop_id", "number"}), None)),
        ("orders_payment_id_key", BusinessKey(None, frozenset(), "orders_payment_id_key")),
    ],
)
def test_business_key_spellings(text: str, expected: BusinessKey) -> None:
    assert BusinessKey.parse(text) == expected


def test_a_malformed_business_key_is_refused(inbox: Inbox) -> None:
    with pytest.raises(ConfigurationError, match="business_key"):
        inbox.handler("stripe", "x", business_key="orders.a.b.c")(lambda event, ctx: None)


def test_a_worker_whose_lease_was_taken_over_runs_nothing(
    inbox: Inbox, deliver: Deliver, clock: ManualClock
) -> None:
    """Worker A leases, stalls past its lease; the next lease gives the event back; worker B
    processes it; A wakes up: its claim matches no row and its handler never runs."""
    deliver(checkout(1))
    store = inbox.store
    now = processor(inbox).now()
    [stalled] = lease(store, 1, now, now + timedelta(seconds=30))
    clock.advance(31)
    assert next_lease(inbox) == []  # it found evt_1 held past its lease: given back, not run
    event = stored(inbox, "evt_1")
    assert event.status is Status.PENDING and event.attempts == 1
    assert event.last_error is not None and "worker lost" in event.last_error
    clock.advance(10)  # past the retry delay
    assert inbox.process_due() == 1  # worker B
    assert processor(inbox).process(stalled) == "lost_lease"  # worker A, too late
    event = stored(inbox, "evt_1")
    assert (event.status, event.attempts) == (Status.PROCESSED, 2)
    assert count(inbox, applied_checkouts) == 1


def test_an_event_that_keeps_losing_its_worker_fails(
    inbox: Inbox, deliver: Deliver, clock: ManualClock
) -> None:
    deliver(checkout(1))
    store = inbox.store
    for _ in range(10):  # max_attempts of the orders app
        clock.advance(5000)  # past the longest backoff (an hour, plus 20 % jitter)
        now = processor(inbox).now()
        assert lease(store, 1, now, now + timedelta(seconds=30))
        clock.advance(31)
        assert next_lease(inbox) == []
    event = stored(inbox, "evt_1")
    assert (event.status, event.outcome, event.attempts) == (Status.FAILED, "worker_lost", 10)
    assert count(inbox, applied_checkouts) == 0


def test_a_live_lease_is_not_taken_back(inbox: Inbox, deliver: Deliver, clock: ManualClock) -> None:
    deliver(checkout(1))
    now = processor(inbox).now()
    lease(inbox.store, 1, now, now + timedelta(seconds=30))
    clock.advance(29)
    assert next_lease(inbox) == []
    event = stored(inbox, "evt_1")
    assert (event.status, event.attempts, event.last_error) == (Status.PROCESSING, 1, None)


def test_leasing_skips_events_not_yet_due(inbox: Inbox, deliver: Deliver) -> None:
    deliver(checkout(1))
    now = processor(inbox).now()
    earlier = now - timedelta(seconds=1)
    assert lease(inbox.store, 5, earlier, now) == []
    assert len(lease(inbox.store, 5, now, now + timedelta(seconds=30))) == 1
    assert lease(inbox.store, 5, now, now) == []  # already leased
