"""A shop-like app for processing tests: Stripe events become rows in the user's own tables.

Configured from the environment so that subprocess workers behave like the test asks:
ORDERS_MAX_ATTEMPTS (default 10), ORDERS_HANDLER_SLEEP (seconds per checkout, default 0),
ORDERS_FIRST_DELAY (seconds before the first retry, default 5).

Tables (created by `create_tables`):
- `applied_checkouts`: one row per application of a checkout event, deliberately WITHOUT a
  unique constraint, so a doubled application would show as two rows;
- `orders`: UNIQUE payment_id, the business key (seed 003's second net);
- `subscriptions`: updated by customer.subscription.updated, which needs its order first.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable

import sqlalchemy as sa

from hookinbox import AsyncHandlerContext, Event, HandlerContext, Inbox, NotReady, RetryPolicy
from hookinbox._storage import parse_url
from hookinbox.sources import Stripe

STRIPE_SECRET = "whsec_test_orders_app"

tables = sa.MetaData()
applied_checkouts = sa.Table(
    "applied_checkouts",
    tables,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("event_id", sa.String(255), nullable=False),
    sa.Column("worker_pid", sa.Integer, nullable=False),
)
orders = sa.Table(
    "orders",
    tables,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("payment_id", sa.String(255), nullable=False, unique=True),
    sa.Column("event_id", sa.String(255), nullable=False),
)
subscriptions = sa.Table(
    "subscriptions",
    tables,
    sa.Column("payment_id", sa.String(255), primary_key=True),
    sa.Column("status", sa.String(32), nullable=False),
)


def create_tables(database_url: str) -> None:
    engine = sa.create_engine(parse_url(database_url))  # the driver hookinbox uses
    tables.create_all(engine)
    engine.dispose()


def build(
    database_url: str | None = None,
    *,
    ack_deadline: float | None = 3.0,
    clock: Callable[[], float] = time.time,
) -> Inbox:
    retry = RetryPolicy(
        max_attempts=int(os.environ.get("ORDERS_MAX_ATTEMPTS", "10")),
        first_delay=float(os.environ.get("ORDERS_FIRST_DELAY", "5")),
    )
    sleep = float(os.environ.get("ORDERS_HANDLER_SLEEP", "0"))
    inbox = Inbox(database_url, retry=retry, ack_deadline=ack_deadline, clock=clock)
    inbox.add_source(Stripe(secret=STRIPE_SECRET))

    if inbox.is_async:
        _async_handlers(inbox, sleep)
    else:
        _sync_handlers(inbox, sleep)

    @inbox.handler("stripe", "test.poison")
    def on_poison(event: Event, ctx: HandlerContext) -> None:
        os._exit(17)  # kills the worker process every time, like a segfaulting C extension

    return inbox


def _sync_handlers(inbox: Inbox, sleep: float) -> None:
    @inbox.handler("stripe", "checkout.session.completed", business_key="orders.payment_id")
    def on_checkout(event: Event, ctx: HandlerContext) -> None:
        session = event.payload["data"]["object"]
        ctx.db.execute(applied_checkouts.insert().values(event_id=event.id, worker_pid=os.getpid()))
        if sleep:
            time.sleep(sleep)
        ctx.db.execute(
            orders.insert().values(payment_id=session["payment_intent"], event_id=event.id)
        )

    @inbox.handler("stripe", "customer.subscription.updated")
    def on_subscription(event: Event, ctx: HandlerContext) -> None:
        subscription = event.payload["data"]["object"]
        payment_id = subscription["payment_intent"]
        found = ctx.db.execute(sa.select(orders.c.id).where(orders.c.payment_id == payment_id))
        if found.first() is None:
            raise NotReady(f"no order for {payment_id} yet")
        ctx.db.execute(sa.delete(subscriptions).where(subscriptions.c.payment_id == payment_id))
        ctx.db.execute(
            subscriptions.insert().values(payment_id=payment_id, status=subscription["status"])
        )


def _async_handlers(inbox: Inbox, sleep: float) -> None:
    """The same handlers on an async URL: `async def`, awaiting the `AsyncConnection`."""

    @inbox.handler("stripe", "checkout.session.completed", business_key="orders.payment_id")
    async def on_checkout(event: Event, ctx: AsyncHandlerContext) -> None:
        session = event.payload["data"]["object"]
        await ctx.db.execute(
            applied_checkouts.insert().values(event_id=event.id, worker_pid=os.getpid())
        )
        if sleep:
            await asyncio.sleep(sleep)
        await ctx.db.execute(
            orders.insert().values(payment_id=session["payment_intent"], event_id=event.id)
        )

    @inbox.handler("stripe", "customer.subscription.updated")
    async def on_subscription(event: Event, ctx: AsyncHandlerContext) -> None:
        subscription = event.payload["data"]["object"]
        payment_id = subscription["payment_intent"]
        query = sa.select(orders.c.id).where(orders.c.payment_id == payment_id)
        if (await ctx.db.execute(query)).first() is None:
            raise NotReady(f"no order for {payment_id} yet")
        await ctx.db.execute(
            sa.delete(subscriptions).where(subscriptions.c.payment_id == payment_id)
        )
        await ctx.db.execute(
            subscriptions.insert().values(payment_id=payment_id, status=subscription["status"])
        )


inbox = build()
