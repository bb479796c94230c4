"""The processing transaction: the handler's writes and the processed mark commit together."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from hookinbox import Event, HandlerContext, Inbox, Status
from tests.apps.orders import applied_checkouts, orders
from tests.processing.conftest import Deliver, checkout, count, stored
from tests.support.clock import ManualClock


def test_a_handled_event_commits_its_effects_and_its_mark(inbox: Inbox, deliver: Deliver) -> None:
    assert deliver(checkout(1)).body["status"] == "accepted"
    assert stored(inbox, "evt_1").status is Status.PENDING
    assert inbox.process_due() == 1
    event = stored(inbox, "evt_1")
    assert (event.status, event.outcome, event.attempts) == (Status.PROCESSED, "handled", 1)
    assert event.processed_at is not None
    assert count(inbox, orders, orders.c.event_id == "evt_1") == 1
    assert inbox.process_due() == 0  # nothing left: a processed event is never run again


def test_duplicates_are_processed_once(inbox: Inbox, deliver: Deliver) -> None:
    for _ in range(3):
        deliver(checkout(1))
    inbox.process_due()
    deliver(checkout(1))  # a late redelivery after processing
    inbox.process_due()
    assert count(inbox, applied_checkouts) == 1
    assert stored(inbox, "evt_1").delivery_count == 4


def test_a_failing_handler_rolls_back_and_retries_with_backoff(
    inbox: Inbox, deliver: Deliver, clock: ManualClock
) -> None:
    calls: list[int] = []

    @inbox.handler("stripe", "checkout.session.completed")
    def then_fail(event: Event, ctx: HandlerContext) -> None:
        calls.append(ctx.attempt)
        if len(calls) == 1:
            raise ValueError("downstream said no")

    deliver(checkout(1))
    inbox.process_due()
    event = stored(inbox, "evt_1")
    assert event.status is Status.PENDING
    assert event.attempts == 1
    assert event.last_error is not None
    assert event.last_error.startswith("ValueError: downstream said no")
    assert "then_fail" in event.last_error  # a short traceback names the failing frame
    assert count(inbox, orders) == 0  # the first handler's write rolled back with the failure
    assert event.next_attempt_at is not None
    delay = (event.next_attempt_at - event.received_at).total_seconds()
    assert 4.0 <= delay <= 6.0  # first retry 5 s, +/- 20 % jitter
    assert inbox.process_due() == 0  # not due yet
    clock.advance(6)
    assert inbox.process_due() == 1
    event = stored(inbox, "evt_1")
    assert (event.status, event.attempts, event.last_error) == (Status.PROCESSED, 2, None)
    assert calls == [1, 2]
    assert count(inbox, orders) == 1


def test_past_max_attempts_the_event_fails_and_waits(
    inbox: Inbox, deliver: Deliver, clock: ManualClock
) -> None:
    @inbox.handler("stripe", "charge.refunded", max_attempts=3)
    def always_fails(event: Event, ctx: HandlerContext) -> None:
        raise RuntimeError("broken")

    deliver({**checkout(9), "type": "charge.refunded"})
    for _ in range(5):
        inbox.process_due()
        clock.advance(3600)
    event = stored(inbox, "evt_9")
    assert (event.status, event.outcome, event.attempts) == (Status.FAILED, "max_attempts", 3)
    assert event.last_error is not None and "RuntimeError: broken" in event.last_error


def test_backoff_grows_and_is_capped(inbox: Inbox, deliver: Deliver, clock: ManualClock) -> None:
    @inbox.handler("stripe", "charge.refunded")
    def always_fails(event: Event, ctx: HandlerContext) -> None:
        raise RuntimeError("broken")

    deliver({**checkout(9), "type": "charge.refunded"})
    delays = []
    for _ in range(8):
        clock.advance(10_000)
        before = clock()
        inbox.process_due()
        event = stored(inbox, "evt_9")
        assert event.next_attempt_at is not None
        delays.append(event.next_attempt_at.timestamp() - before)
    assert delays[0] == pytest.approx(5, rel=0.21)
    assert delays[1] == pytest.approx(20, rel=0.21)
    assert delays[2] == pytest.approx(80, rel=0.21)
    assert all(d <= 3600 * 1.2 + 1 for d in delays)
    assert delays[-1] == pytest.approx(3600, rel=0.21)


def test_events_without_handlers_are_unhandled_not_failed(inbox: Inbox, deliver: Deliver) -> None:
    deliver({**checkout(5), "type": "invoice.created"})
    inbox.process_due()
    event = stored(inbox, "evt_5")
    assert (event.status, event.outcome, event.attempts) == (Status.UNHANDLED, "no_handler", 1)


def test_handlers_run_in_registration_order_in_one_transaction(
    db_url: str, clock: ManualClock
) -> None:
    from tests.apps import orders as app

    inbox = Inbox(db_url, clock=clock)
    inbox.add_source(app.Stripe(secret=app.STRIPE_SECRET))
    seen: list[str] = []
    log = sa.Table("log", sa.MetaData(), sa.Column("entry", sa.String(50)))
    log.create(inbox.store.engine)

    @inbox.handler("stripe", "*")
    def first(event: Event, ctx: HandlerContext) -> None:
        seen.append("any")
        ctx.db.execute(log.insert().values(entry="any"))

    @inbox.handler("stripe", "checkout.session.completed")
    def second(event: Event, ctx: HandlerContext) -> None:
        seen.append("specific")
        ctx.db.execute(log.insert().values(entry="specific"))
        raise RuntimeError("the second fails: the first one's write must roll back too")

    from tests.support.signing import stripe_delivery

    headers, body = stripe_delivery(checkout(1), app.STRIPE_SECRET, timestamp=int(clock()))
    inbox.receive("stripe", headers, body)
    inbox.process_due()
    assert seen == ["any", "specific"]
    with inbox.store.engine.connect() as connection:
        assert connection.execute(sa.select(sa.func.count()).select_from(log)).scalar() == 0
    inbox.close()


def test_async_handlers_share_the_transaction(inbox: Inbox, deliver: Deliver) -> None:
    """On a sync URL an `async def` handler runs on a loop of the worker thread's, with the
    sync `ctx.db`; on an async URL it gets the `AsyncConnection`. Either way, one transaction."""

    @inbox.handler("stripe", "charge.succeeded")
    async def record(event: Event, ctx: Any) -> None:
        insert = orders.insert().values(payment_id="pi_async", event_id=event.id)
        if inbox.is_async:
            await ctx.db.execute(insert)
        else:
            ctx.db.execute(insert)

    deliver({**checkout(3), "type": "charge.succeeded"})
    inbox.process_due()
    assert stored(inbox, "evt_3").status is Status.PROCESSED
    assert count(inbox, orders, orders.c.payment_id == "pi_async") == 1


def test_a_swallowed_database_error_is_not_taken_for_success(
    inbox: Inbox, deliver: Deliver, backend: str
) -> None:
    """A handler that catches a failed write and carries on.

    On PostgreSQL the error aborted the transaction: committing it would silently roll back,
    so the event must be retried, not marked processed. SQLite keeps the transaction usable,
    so there the handler's other writes commit and the event is processed.
    """

    @inbox.handler("stripe", "charge.captured")
    def swallow(event: Event, ctx: HandlerContext) -> None:
        ctx.db.execute(orders.insert().values(payment_id="pi_x", event_id=event.id))
        try:
            ctx.db.execute(orders.insert().values(payment_id="pi_x", event_id=event.id))
        except sa.exc.IntegrityError:
            pass

    deliver({**checkout(4), "type": "charge.captured"})
    inbox.process_due()
    event = stored(inbox, "evt_4")
    if backend == "postgres":
        assert event.status is Status.PENDING
        assert event.last_error is not None
        assert count(inbox, orders) == 0
    else:
        assert event.status is Status.PROCESSED
        assert count(inbox, orders) == 1


def test_policy_levels_most_specific_wins(db_url: str, clock: ManualClock) -> None:
    from hookinbox import RetryPolicy
    from tests.apps import orders as app
    from tests.support.signing import stripe_delivery

    inbox = Inbox(db_url, clock=clock, retry=RetryPolicy(max_attempts=7, first_delay=1))
    inbox.add_source(app.Stripe(secret=app.STRIPE_SECRET), retry=RetryPolicy(max_attempts=5))

    @inbox.handler("stripe", "a", max_attempts=4)
    def a1(event: Event, ctx: HandlerContext) -> None:
        raise RuntimeError("a1")

    @inbox.handler("stripe", "a", max_attempts=2)
    def a2(event: Event, ctx: HandlerContext) -> None:
        raise RuntimeError("a2")

    @inbox.handler("stripe", "b")
    def b(event: Event, ctx: HandlerContext) -> None:
        raise RuntimeError("b")

    for number, kind in ((1, "a"), (2, "b")):
        headers, body = stripe_delivery(
            {**checkout(number), "type": kind}, app.STRIPE_SECRET, timestamp=int(clock())
        )
        inbox.receive("stripe", headers, body)
    for _ in range(10):
        inbox.process_due()
        clock.advance(timedelta(hours=2).total_seconds())
    first, second = stored(inbox, "evt_1"), stored(inbox, "evt_2")
    assert (first.status, first.attempts) == (Status.FAILED, 2)  # strictest handler: 2
    assert (second.status, second.attempts) == (Status.FAILED, 5)  # the source's 5 over 7
    inbox.close()
