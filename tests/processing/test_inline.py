"""Inline mode (seed 000, serverless style): process in the request, or keep nothing."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hookinbox import Event, HandlerContext, Inbox, NotReady, Status
from hookinbox.sources import Stripe
from tests.apps.orders import STRIPE_SECRET, create_tables, orders
from tests.processing.conftest import checkout, count, subscription_update
from tests.support.asgi import ASGIClient
from tests.support.signing import stripe_delivery


@pytest.fixture
def inline(db_url: str) -> Iterator[Inbox]:
    create_tables(db_url)
    inbox = Inbox(db_url)
    inbox.add_source(Stripe(secret=STRIPE_SECRET), inline=True)

    @inbox.handler("stripe", "checkout.session.completed", business_key="orders.payment_id")
    def on_checkout(event: Event, ctx: HandlerContext) -> None:
        payment = event.payload["data"]["object"]["payment_intent"]
        ctx.db.execute(orders.insert().values(payment_id=payment, event_id=event.id))

    @inbox.handler("stripe", "customer.subscription.updated")
    def on_update(event: Event, ctx: HandlerContext) -> None:
        raise NotReady("order not there yet")

    @inbox.handler("stripe", "charge.failed")
    def crash(event: Event, ctx: HandlerContext) -> None:
        ctx.db.execute(orders.insert().values(payment_id="pi_crash", event_id=event.id))
        raise RuntimeError("boom")

    yield inbox
    inbox.close()


def post(inbox: Inbox, event: dict[str, object]):  # type: ignore[no-untyped-def]
    headers, body = stripe_delivery(event, STRIPE_SECRET)
    return ASGIClient(inbox.asgi()).post("/webhooks/stripe", headers=headers, content=body)


def test_success_is_answered_after_the_handlers_committed(inline: Inbox) -> None:
    response = post(inline, checkout(1))
    assert response.status_code == 200
    assert response.json() == {"status": "accepted", "event_id": "evt_1"}
    event = inline.store.get_event("stripe", "evt_1")
    assert event is not None
    assert (event.status, event.outcome, event.attempts) == (Status.PROCESSED, "handled", 1)
    assert count(inline, orders) == 1
    again = post(inline, checkout(1))
    assert again.json()["status"] == "duplicate"
    assert count(inline, orders) == 1


@pytest.mark.parametrize(
    ("event", "detail"),
    [
        (subscription_update(2, payment="pi_9"), "not ready"),
        ({**checkout(3), "type": "charge.failed"}, "RuntimeError"),
    ],
)
def test_a_failed_handler_leaves_no_claim_and_asks_for_a_retry(
    inline: Inbox, event: dict[str, object], detail: str
) -> None:
    response = post(inline, event)
    assert response.status_code == 503
    assert response.headers["retry-after"] == "5"
    assert detail in response.json()["detail"]
    assert inline.store.get_event("stripe", str(event["id"])) is None  # no claim left behind
    assert count(inline, orders) == 0
    # The provider's retry is therefore new, not a duplicate.
    assert post(inline, event).status_code == 503


def test_a_business_duplicate_inline_is_a_200(inline: Inbox) -> None:
    assert post(inline, checkout(1, payment="pi_same")).status_code == 200
    second = post(inline, checkout(2, payment="pi_same"))
    assert second.status_code == 200
    event = inline.store.get_event("stripe", "evt_2")
    assert event is not None and event.outcome == "business_duplicate"
    assert count(inline, orders) == 1


def test_an_inline_event_without_handlers_is_unhandled(inline: Inbox) -> None:
    assert post(inline, {**checkout(4), "type": "invoice.created"}).status_code == 200
    event = inline.store.get_event("stripe", "evt_4")
    assert event is not None and event.status is Status.UNHANDLED
