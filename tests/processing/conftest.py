"""Fixtures for in-process processing tests: the orders app on a manual clock."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from hookinbox import Event, Inbox, Reply
from tests.apps import orders as orders_app
from tests.support.clock import ManualClock
from tests.support.signing import stripe_delivery

Deliver = Callable[..., Reply]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def inbox(db_url: str, clock: ManualClock) -> Iterator[Inbox]:
    orders_app.create_tables(db_url)
    inbox = orders_app.build(db_url, clock=clock)
    yield inbox
    inbox.close()


def checkout(number: int | str, payment: str | None = None) -> dict[str, Any]:
    return {
        "id": f"evt_{number}",
        "type": "checkout.session.completed",
        "created": int(time.time()),
        "data": {"object": {"id": f"cs_{number}", "payment_intent": payment or f"pi_{number}"}},
    }


def subscription_update(number: int | str, payment: str, status: str = "active") -> dict[str, Any]:
    return {
        "id": f"evt_{number}",
        "type": "customer.subscription.updated",
        "created": int(time.time()) + 1,
        "data": {"object": {"id": f"sub_{number}", "payment_intent": payment, "status": status}},
    }


@pytest.fixture
def deliver(inbox: Inbox, clock: ManualClock) -> Deliver:
    def deliver(event: dict[str, Any], source: str = "stripe") -> Reply:
        headers, body = stripe_delivery(event, orders_app.STRIPE_SECRET, timestamp=int(clock()))
        return inbox.receive(source, headers, body)

    return deliver


def stored(inbox: Inbox, event_id: str) -> Event:
    event = inbox.store.get_event("stripe", event_id)
    assert event is not None, f"{event_id} was not stored"
    return event


def count(inbox: Inbox, table: sa.Table, *where: sa.ColumnElement[bool]) -> int:
    query = sa.select(sa.func.count()).select_from(table).where(*where)
    with inbox.store.engine.connect() as connection:
        return int(connection.execute(query).scalar_one())
