"""A batch leased together settles item by item: one item's fate never changes another's.

The worker leases up to twice its concurrency in one statement (`_storage/_leases.py`) and
its threads take the items one by one, so items of one batch share a lease token and wait for
a thread. Here four events leased in one batch end four different ways: a handler raises, a
handler is not ready yet, one item waits past its lease (swept and processed by another
worker meanwhile) and one succeeds.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from hookinbox import Event, HandlerContext, Inbox, NotReady, Status
from hookinbox._processing._processor import Processor
from hookinbox._processing._queues import EventQueue
from tests.apps.orders import applied_checkouts, orders
from tests.processing.conftest import Deliver, checkout, count, stored
from tests.support.clock import ManualClock


@pytest.fixture(params=["sync"])
def driver(request: pytest.FixtureRequest) -> str:
    """The thread worker's `Processor`, driven by hand: the sync driver only. The async
    worker's `AsyncProcessor` takes the same decisions (`Processor.failed`, `release`); its
    batches are the suites' (the `async` driver) and tests/processing/test_async_worker.py."""
    return str(request.param)


def processor(inbox: Inbox) -> Processor:
    return inbox._runtime.processor


def test_each_item_of_a_leased_batch_settles_on_its_own(
    inbox: Inbox, deliver: Deliver, clock: ManualClock
) -> None:
    @inbox.handler("stripe", "charge.failed")
    def raises(event: Event, ctx: HandlerContext) -> None:
        ctx.db.execute(orders.insert().values(payment_id="pi_raised", event_id=event.id))
        raise RuntimeError("the payment service is down")

    @inbox.handler("stripe", "charge.pending")
    def not_ready(event: Event, ctx: HandlerContext) -> None:
        ctx.db.execute(orders.insert().values(payment_id="pi_early", event_id=event.id))
        raise NotReady("its order is not there yet", retry_in=2)

    deliver({**checkout(1), "type": "charge.failed"})
    deliver({**checkout(2), "type": "charge.pending"})
    deliver(checkout(3, payment="pi_waited"))  # waits past its lease
    deliver(checkout(4, payment="pi_ok"))
    work = processor(inbox)
    now = work.now()
    batch = inbox.store.events.lease(limit=8, now=now, until=now + timedelta(seconds=30)).fresh
    assert [item.event.id for item in batch] == ["evt_1", "evt_2", "evt_3", "evt_4"]
    assert len({item.token for item in batch}) == 1  # one lease, one statement
    raised, deferred, waited, succeeded = batch

    assert work.process(raised) == "retried"
    assert work.process(deferred) == "deferred"
    assert work.process(succeeded) == "processed"
    first, second, fourth = (stored(inbox, f"evt_{n}") for n in (1, 2, 4))
    assert (first.status, first.attempts) == (Status.PENDING, 1)
    assert first.last_error is not None and "payment service is down" in first.last_error
    assert (second.status, second.attempts, second.deferrals) == (Status.DEFERRED, 0, 1)
    assert (fourth.status, fourth.outcome, fourth.attempts) == (Status.PROCESSED, "handled", 1)
    assert stored(inbox, "evt_3").status is Status.PROCESSING  # held, not started

    clock.advance(31)  # evt_3 is still held: its lease runs out, the next lease gives it back
    retried = EventQueue(work, lease_seconds=30).lease(8)  # a worker's lease: evt_1, evt_2 due
    assert sorted(item.event.id for item in retried) == ["evt_1", "evt_2"]
    given_back = stored(inbox, "evt_3")
    assert (given_back.status, given_back.attempts) == (Status.PENDING, 1)
    assert given_back.last_error is not None and "worker lost" in given_back.last_error
    for item in retried:
        work.process(item)
    clock.advance(60)  # past the retry delay: another worker leases what is due
    later = work.now()
    again = inbox.store.events.lease(limit=8, now=later, until=later + timedelta(seconds=30)).fresh
    [taken_over] = [item for item in again if item.event.id == "evt_3"]
    assert work.process(waited) == "lost_lease"  # the first holder, too late: runs nothing
    assert work.process(taken_over) == "processed"

    third = stored(inbox, "evt_3")
    assert (third.status, third.outcome, third.attempts) == (Status.PROCESSED, "handled", 2)
    assert count(inbox, orders) == 2  # evt_3's and evt_4's; the failed ones rolled back
    assert count(inbox, applied_checkouts) == 2
