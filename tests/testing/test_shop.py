"""The example shop's handlers, tested with the kit as a user tests theirs: the plugin's
fixtures, deliveries signed like Stripe's, the worker's processing in the test's thread, a
clock moved by hand instead of sleeping through retries."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest
import sqlalchemy as sa

from hookinbox import Inbox, Status
from hookinbox.examples import shop
from hookinbox.testing import (
    Answer,
    InboxHarness,
    check_exactly_once,
    stripe_checkout_session,
    stripe_event,
    stripe_subscription,
)


@pytest.fixture
def hookinbox_app() -> Inbox:
    return shop.inbox


def rows(hookinbox: InboxHarness, table: sa.Table) -> list[dict[str, object]]:
    with hookinbox.inbox.store.reading() as connection:
        return [dict(row) for row in connection.execute(sa.select(table)).mappings()]


def receipts(hookinbox: InboxHarness) -> list[str]:
    from hookinbox._storage._schema import outbox

    with hookinbox.inbox.store.reading() as connection:
        return list(connection.execute(sa.select(outbox.c.message_key)).scalars())


def test_a_checkout_delivered_three_times_at_once_is_one_order(
    hookinbox: InboxHarness, deliver: Callable[..., list[Answer]], run_due: Callable[[], int]
) -> None:
    session = stripe_checkout_session(payment_intent="pi_1", amount_total=4900)
    event = stripe_event("checkout.session.completed", session)
    answers = deliver("stripe", event, copies=3, concurrently=True)
    assert sorted(a.status for a in answers) == ["accepted", "duplicate", "duplicate"]
    assert run_due() == 2  # the event, then its receipt
    assert [(o["payment_id"], o["amount"]) for o in rows(hookinbox, shop.orders)] == [
        ("pi_1", 4900)
    ]
    assert receipts(hookinbox) == ["receipt:pi_1"]
    stored = hookinbox.event("stripe", event["id"])
    assert stored is not None and stored.status is Status.PROCESSED
    assert stored.delivery_count == 3


def test_an_update_before_its_checkout_waits_for_it_without_sleeping(
    hookinbox: InboxHarness,
) -> None:
    subscription = stripe_subscription(customer="cus_1", status="active")
    update = stripe_event("customer.subscription.updated", subscription)
    checkout = stripe_event("checkout.session.completed", stripe_checkout_session(customer="cus_1"))
    assert hookinbox.deliver("stripe", update)[0].status == "accepted"
    hookinbox.run_due()
    deferred = hookinbox.event("stripe", update["id"])
    assert deferred is not None and deferred.status is Status.DEFERRED
    assert hookinbox.deliver("stripe", checkout)[0].status == "accepted"
    hookinbox.run_due()
    assert rows(hookinbox, shop.subscriptions) == []  # the update's retry is not due yet
    hookinbox.advance(timedelta(minutes=1))
    assert [(s["subscription_id"], s["status"]) for s in rows(hookinbox, shop.subscriptions)] == [
        (subscription["id"], "active")
    ]


def test_a_stale_update_does_not_overwrite_a_newer_one(hookinbox: InboxHarness) -> None:
    checkout = stripe_checkout_session(customer="cus_2")
    hookinbox.deliver("stripe", stripe_event("checkout.session.completed", checkout))
    subscription = stripe_subscription(customer="cus_2")
    now = int(hookinbox.clock())
    newer = stripe_event(
        "customer.subscription.updated", subscription | {"status": "canceled"}, created=now
    )
    older = stripe_event(
        "customer.subscription.updated", subscription | {"status": "past_due"}, created=now - 60
    )
    hookinbox.deliver("stripe", newer)
    hookinbox.deliver("stripe", older)
    hookinbox.run_due()
    assert [s["status"] for s in rows(hookinbox, shop.subscriptions)] == ["canceled"]


def test_a_forgery_and_a_stale_capture_are_refused(hookinbox: InboxHarness) -> None:
    event = stripe_event("checkout.session.completed", stripe_checkout_session())
    assert hookinbox.deliver("stripe", event, secret="whsec_guessed")[0].status_code == 401
    headers, body = hookinbox.sign("stripe", event)
    hookinbox.clock.advance(timedelta(minutes=10))  # past Stripe's 5-minute tolerance
    assert hookinbox.post("stripe", headers, body).status_code == 401
    assert list(hookinbox.events()) == []


def test_an_update_whose_checkout_never_comes_fails_at_the_deadline(
    hookinbox: InboxHarness,
) -> None:
    update = stripe_event("customer.subscription.updated", stripe_subscription())
    hookinbox.deliver("stripe", update)
    hookinbox.run_due()
    for _ in range(3 * 4):  # three days of worker passes, in no time
        hookinbox.advance(timedelta(hours=6))
        stored = hookinbox.event("stripe", update["id"])
        assert stored is not None
        if stored.status is not Status.DEFERRED:
            break
    hookinbox.advance(timedelta(hours=1))
    stored = hookinbox.event("stripe", update["id"])
    assert stored is not None
    assert (stored.status, stored.outcome) == (Status.FAILED, "not_ready_deadline")
    assert stored.attempts == 0  # NotReady spends no attempt


def test_the_shop_applies_each_event_exactly_once(hookinbox_database: str | None) -> None:
    """Its checkout, a receipt through the outbox, two subscription updates (the older one
    may arrive last, either may come before the checkout): one order, one receipt, the
    subscription in its newest state, in every schedule tried."""
    from hookinbox._storage._schema import outbox

    created = int(time.time())
    subscription = stripe_subscription(id="sub_1", customer="cus_1")
    events = [
        ("stripe", stripe_event("checkout.session.completed",
                                stripe_checkout_session(customer="cus_1", payment_intent="pi_1"),
                                created=created)),
        ("stripe", stripe_event("customer.subscription.updated",
                                subscription | {"status": "past_due"}, created=created + 10)),
        ("stripe", stripe_event("customer.subscription.updated",
                                subscription | {"status": "active"}, created=created + 20)),
    ]  # fmt: skip

    def effects(connection: sa.Connection) -> Iterator[object]:
        yield from connection.execute(sa.select(shop.orders.c.payment_id)).scalars()
        columns = (shop.subscriptions.c.subscription_id, shop.subscriptions.c.status)
        yield from (tuple(row) for row in connection.execute(sa.select(*columns)))
        yield from connection.execute(sa.select(outbox.c.message_key)).scalars()

    report = check_exactly_once(
        shop.inbox,
        events,
        effects=effects,
        expected={"pi_1": None, "sub_1": "active", "receipt:pi_1": None},
        database_url=hookinbox_database,
        examples=5,
        shrink_budget=3,
        seed=7,
    )
    assert report.schedules == 6 and report.deliveries == 9
