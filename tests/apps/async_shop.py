"""A shop on FastAPI and SQLAlchemy's async ORM, as a team writes one, with hookinbox inside
(issue 46's proof: tests/frameworks/test_fastapi_async.py in process, and
tests/e2e/test_async_fastapi_storm.py under uvicorn with SIGKILLed async workers).

    ASYNC_SHOP_DATABASE_URL=sqlite+aiosqlite:///shop.db uvicorn tests.apps.async_shop:app
    hookinbox worker tests.apps.async_shop:inbox        # with ASYNC_SHOP_WORKER=0 above

- `Order` (UNIQUE payment_id) and `Subscription` are the team's own models, written through a
  repository that only knows the `AsyncSession` it is given;
- `checkout.session.completed` places an order (business key: the payment);
- `customer.subscription.updated` waits (NotReady) for its customer's order, skips an update
  older than one already applied (the ordering guard), and keeps the subscription's status;
- `invoice.paid` places the renewal's order and then books its shipment with a warehouse that
  is down, always: the error takes the order back with the claim, and the event is retried;
- the app's lifespan runs the worker on the app's event loop, unless ASYNC_SHOP_WORKER=0
  (the worker then runs as `hookinbox worker`, a process of its own).

The URL comes from $ASYNC_SHOP_DATABASE_URL (an async driver: `sqlite+aiosqlite:///...` or
`postgresql+asyncpg://...`); the Stripe secret from $STRIPE_WEBHOOK_SECRET, with a default
for local trials.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request
from sqlalchemy import String, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from hookinbox import AsyncHandlerContext, Event, Inbox, NotReady
from hookinbox.sources import Stripe

DATABASE_URL = os.environ.get("ASYNC_SHOP_DATABASE_URL", "sqlite+aiosqlite:///async-shop.db")
STRIPE_SECRET = os.environ.get("STRIPE_WEBHOOK_SECRET", "whsec_async_shop_trial")
ORDERS_TABLE = "async_shop_orders"
SUBSCRIPTIONS_TABLE = "async_shop_subscriptions"


# -- the team's models and repository ---------------------------------------------------------


class Base(DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = ORDERS_TABLE
    id: Mapped[int] = mapped_column(primary_key=True)
    payment_id: Mapped[str] = mapped_column(String(255), unique=True)
    customer: Mapped[str] = mapped_column(String(255), index=True)


class Subscription(Base):
    __tablename__ = SUBSCRIPTIONS_TABLE
    id: Mapped[str] = mapped_column(String(255), primary_key=True)
    customer: Mapped[str] = mapped_column(String(255), index=True)
    status: Mapped[str] = mapped_column(String(32))


class Shop:
    """The shop's reads and writes; it only knows the session it is given."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def place_order(self, payment_id: str, customer: str) -> None:
        self.session.add(Order(payment_id=payment_id, customer=customer))

    async def has_customer(self, customer: str) -> bool:
        query = select(Order.id).where(Order.customer == customer).limit(1)
        return (await self.session.scalar(query)) is not None

    async def set_subscription_status(self, subscription: str, customer: str, status: str) -> None:
        current = await self.session.get(Subscription, subscription)
        if current is None:
            self.session.add(Subscription(id=subscription, customer=customer, status=status))
        else:
            current.status = status

    async def orders(self) -> list[Order]:
        return list((await self.session.scalars(select(Order).order_by(Order.id))).all())


# -- the warehouse the shop books shipments with ---------------------------------------------


class WarehouseUnavailable(RuntimeError):
    pass


async def book_shipment(payment_id: str) -> None:
    """The warehouse's API; in this app it is down, always."""
    raise WarehouseUnavailable(f"the warehouse refused the shipment of {payment_id}")


# -- hookinbox's handlers ------------------------------------------------------------------------


async def on_checkout(event: Event, ctx: AsyncHandlerContext) -> None:
    checkout = event.payload["data"]["object"]
    async with ctx.session() as session:
        await Shop(session).place_order(checkout["payment_intent"], checkout["customer"])
        await session.commit()


async def on_subscription_updated(event: Event, ctx: AsyncHandlerContext) -> None:
    subscription = event.payload["data"]["object"]
    async with ctx.session() as session:
        shop = Shop(session)
        if not await shop.has_customer(subscription["customer"]):
            # The update overtook the checkout that creates the customer: try again later.
            raise NotReady(f"no order for customer {subscription['customer']} yet")
        key = f"stripe:subscription:{subscription['id']}"
        if not await ctx.ordering.advance(key, int(event.payload["created"])):
            return  # a later update of this subscription was applied already
        await shop.set_subscription_status(
            subscription["id"], subscription["customer"], subscription["status"]
        )
        await session.commit()


async def on_invoice_paid(event: Event, ctx: AsyncHandlerContext) -> None:
    invoice = event.payload["data"]["object"]
    async with ctx.session() as session:
        await Shop(session).place_order(invoice["payment_intent"], invoice["customer"])
        await session.commit()
    # Committed in the session, yet not kept: the claim's transaction rolls back with this.
    await book_shipment(invoice["payment_intent"])


def create_inbox(database_url: str) -> Inbox:
    inbox = Inbox(database_url)
    inbox.add_source(Stripe(secret=STRIPE_SECRET))
    inbox.after_migrate(Base.metadata.create_all)  # a real shop runs its own migrations
    business_key = f"{ORDERS_TABLE}.payment_id"
    inbox.handler("stripe", "checkout.session.completed", business_key=business_key)(on_checkout)
    inbox.handler("stripe", "customer.subscription.updated")(on_subscription_updated)
    inbox.handler("stripe", "invoice.paid")(on_invoice_paid)
    return inbox


# -- the FastAPI app ---------------------------------------------------------------------------


def create_app(inbox: Inbox, database_url: str, *, worker: bool = True) -> FastAPI:
    """The shop's app: hookinbox's ASGI app at /webhooks, GET /orders on the app's own
    engine; `worker`: run hookinbox's worker in the lifespan, on the app's event loop."""
    engine = create_async_engine(database_url)
    sessions = async_sessionmaker(engine, expire_on_commit=False)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            if worker:
                async with inbox.running():
                    yield
            else:
                yield
        finally:
            await inbox.aclose()
            await engine.dispose()

    app = FastAPI(lifespan=lifespan)
    app.state.sessions = sessions
    app.mount("/webhooks", inbox.asgi())  # POST /webhooks/stripe, GET /webhooks/readyz
    app.get("/orders")(list_orders)
    return app


async def app_session(request: Request) -> AsyncIterator[AsyncSession]:
    """A session of the app's own engine, for one request."""
    async with request.app.state.sessions() as session:
        yield session


async def list_orders(
    session: Annotated[AsyncSession, Depends(app_session)],
) -> list[dict[str, Any]]:
    return [
        {"payment_id": order.payment_id, "customer": order.customer}
        for order in await Shop(session).orders()
    ]


inbox = create_inbox(DATABASE_URL)
app = create_app(inbox, DATABASE_URL, worker=os.environ.get("ASYNC_SHOP_WORKER") != "0")
