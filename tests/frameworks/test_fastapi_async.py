"""A FastAPI app on SQLAlchemy's async ORM (tests/apps/async_shop.py), in process: the worker
runs in the app's lifespan on the app's event loop, the handlers write through `ctx.session()`
and the shop's own repository, and Stripe's trouble arrives signed over the app's router.

On SQLite (aiosqlite) and PostgreSQL (asyncpg). The same app under uvicorn, with the worker
as processes SIGKILLed mid-batch, is tests/e2e/test_async_fastapi_storm.py.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from hookinbox import Inbox, Status
from hookinbox.testing import sign
from tests.apps.async_shop import Order, Subscription, create_app, create_inbox
from tests.conftest import async_twin

WAIT = 20.0
"""Seconds any one step may take on a loaded machine (a NotReady retry comes after ~1 s)."""


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    """The databases with an async driver in hookinbox (MariaDB has none: docs/async.md)."""
    return str(request.param)


@pytest.fixture(params=["sync"])
def driver(request: pytest.FixtureRequest) -> str:
    """The app is given the async twin of the sync URL (`async_twin`)."""
    return str(request.param)


def checkout(event_id: str, payment: str, customer: str, created: int) -> dict[str, Any]:
    return {
        "id": event_id,
        "object": "event",
        "type": "checkout.session.completed",
        "created": created,
        "data": {"object": {"id": f"cs_{event_id}", "payment_intent": payment,
                            "customer": customer}},
    }  # fmt: skip


def subscription_update(
    event_id: str, subscription: str, customer: str, status: str, created: int
) -> dict[str, Any]:
    return {
        "id": event_id,
        "object": "event",
        "type": "customer.subscription.updated",
        "created": created,
        "data": {"object": {"id": subscription, "customer": customer, "status": status}},
    }


def invoice_paid(event_id: str, payment: str, customer: str, created: int) -> dict[str, Any]:
    return {
        "id": event_id,
        "object": "event",
        "type": "invoice.paid",
        "created": created,
        "data": {"object": {"id": f"in_{event_id}", "payment_intent": payment,
                            "customer": customer}},
    }  # fmt: skip


class Deliveries:
    """Deliveries to the app, signed as Stripe signs them, and what the inbox made of them."""

    def __init__(self, client: httpx.AsyncClient, inbox: Inbox) -> None:
        self.client = client
        self.inbox = inbox

    async def deliver(self, event: dict[str, Any], times: int = 1) -> None:
        for _ in range(times):
            headers, body = sign(self.inbox.sources["stripe"], event)
            response = await self.client.post("/webhooks/stripe", headers=headers, content=body)
            assert response.status_code == 200, response.text

    def event(self, event_id: str) -> Any:
        event = self.inbox.store.get_event("stripe", event_id)
        assert event is not None, f"{event_id} was not stored"
        return event

    async def until(self, condition: Callable[[], bool], what: str) -> None:
        """Wait on the loop (the worker runs beside us, on it) until `condition()` holds."""
        deadline = time.monotonic() + WAIT
        while not condition():
            assert time.monotonic() < deadline, f"timed out after {WAIT:.0f} s waiting {what}"
            await asyncio.sleep(0.05)

    async def processed(self, *event_ids: str) -> None:
        await self.until(
            lambda: all(self.event(e).status is Status.PROCESSED for e in event_ids),
            f"for {', '.join(event_ids)} to be processed",
        )


def test_the_async_orm_shop_applies_each_event_once_and_rolls_a_failure_back(
    db_url: str,
) -> None:
    url = async_twin(db_url)
    inbox = create_inbox(url)
    app = create_app(inbox, url)
    now = int(time.time())

    async def play() -> list[dict[str, str]]:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://shop") as client:
                stripe = Deliveries(client, inbox)
                # sub_2's update overtakes the checkout that creates its customer: NotReady.
                await stripe.deliver(subscription_update("evt_u2", "sub_2", "cus_2", "active",
                                                         now + 5))  # fmt: skip
                await stripe.until(
                    lambda: stripe.event("evt_u2").status is Status.DEFERRED,
                    "for the early update to be deferred",
                )
                # Each checkout twice, as Stripe does; evt_c3 pays pi_1 again (business key).
                for event in (
                    checkout("evt_c1", "pi_1", "cus_1", now),
                    checkout("evt_c2", "pi_2", "cus_2", now),
                    checkout("evt_c3", "pi_1", "cus_1", now + 1),
                ):
                    await stripe.deliver(event, times=2)
                await stripe.processed("evt_c1", "evt_c2", "evt_c3")
                # sub_1: the newer update first, twice, then the older one, which must lose.
                newer = subscription_update("evt_u1b", "sub_1", "cus_1", "past_due", now + 20)
                older = subscription_update("evt_u1a", "sub_1", "cus_1", "active", now + 10)
                await stripe.deliver(newer, times=2)
                await stripe.processed("evt_u1b")
                await stripe.deliver(older)
                # The warehouse is down: the renewal's order goes back with the claim.
                await stripe.deliver(invoice_paid("evt_i1", "pi_9", "cus_1", now + 30))
                await stripe.processed("evt_u1a", "evt_u2")
                await stripe.until(
                    lambda: stripe.event("evt_i1").attempts >= 1,
                    "for the renewal's first attempt",
                )
                return list((await client.get("/orders")).json())

    orders = asyncio.run(play())

    # Read through the app's own session: once each, and no pi_9. (In the order the worker's
    # concurrent attempts committed them: sorted here.)
    assert sorted(orders, key=lambda order: order["payment_id"]) == [
        {"payment_id": "pi_1", "customer": "cus_1"},
        {"payment_id": "pi_2", "customer": "cus_2"},
    ]
    with inbox.store.reading() as connection:
        rows = connection.execute(sa.select(Order.payment_id).order_by(Order.payment_id))
        subscriptions = connection.execute(
            sa.select(Subscription.id, Subscription.customer, Subscription.status)
        )
        assert list(rows.scalars()) == ["pi_1", "pi_2"]
        assert sorted(subscriptions) == [
            ("sub_1", "cus_1", "past_due"),
            ("sub_2", "cus_2", "active"),
        ]
    events = {e: inbox.store.get_event("stripe", e) for e in
              ("evt_c1", "evt_c2", "evt_c3", "evt_u1a", "evt_u1b", "evt_u2", "evt_i1")}  # fmt: skip
    summary = {e: (ev.status, ev.outcome, ev.delivery_count) for e, ev in events.items() if ev}
    assert summary == {
        "evt_c1": (Status.PROCESSED, "handled", 2),
        "evt_c2": (Status.PROCESSED, "handled", 2),
        "evt_c3": (Status.PROCESSED, "business_duplicate", 2),
        "evt_u1b": (Status.PROCESSED, "handled", 2),
        "evt_u1a": (Status.PROCESSED, "handled", 1),  # applied nothing: the guard said older
        "evt_u2": (Status.PROCESSED, "handled", 1),
        "evt_i1": (Status.PENDING, None, 1),
    }
    early, failed = events["evt_u2"], events["evt_i1"]
    assert early is not None and early.deferrals >= 1  # it did wait for its checkout
    assert failed is not None and failed.attempts >= 1
    assert (failed.last_error or "").startswith(
        "WarehouseUnavailable: the warehouse refused the shipment of pi_9"
    ), failed.last_error
    inbox.close()
