"""A small shop: Stripe payments become orders, exactly once. Copy it to start your own.

    hookinbox serve hookinbox.examples.shop:inbox      # HTTP on :8000 and a worker

What it shows:
- an `orders` table of the shop's own, with UNIQUE payment_id as the second safety net;
- `checkout.session.completed` creates the order in the transaction that marks the event done;
- `customer.subscription.updated` raises NotReady while its order is unknown (out of order),
  skips stale updates with the ordering guard, and keeps `shop_subscriptions` current;
- a receipt e-mail goes through the outbox, in the order's transaction, keyed by the payment;
- Shopify, GitHub and Standard Webhooks deliveries are verified and stored (`unhandled`).

Secrets come from the environment; the defaults are for local trials only.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Connection

from hookinbox import Event, HandlerContext, Inbox, Message, NotReady
from hookinbox.outbox import HTTPDestination
from hookinbox.sources import GitHub, Shopify, StandardWebhooks, Stripe

log = logging.getLogger("hookinbox.examples.shop")

inbox = Inbox(os.environ.get("SHOP_DATABASE_URL", "sqlite:///hookinbox-shop.db"))
inbox.add_source(Stripe(secret=os.environ.get("STRIPE_WEBHOOK_SECRET", "whsec_local_trial")))
inbox.add_source(Shopify(secret=os.environ.get("SHOPIFY_CLIENT_SECRET", "shopify-local-trial")))
inbox.add_source(GitHub(secret=os.environ.get("GITHUB_WEBHOOK_SECRET", "github-local-trial")))
inbox.add_source(
    StandardWebhooks(
        secret=os.environ.get("STANDARD_WEBHOOK_SECRET", "whsec_bG9jYWwtdHJpYWwtc2VjcmV0")
    )
)

shop = sa.MetaData()
orders = sa.Table(
    "shop_orders",
    shop,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("payment_id", sa.String(255), nullable=False, unique=True),
    sa.Column("customer_id", sa.String(255)),
    sa.Column("email", sa.String(255)),
    sa.Column("amount", sa.Integer),
    sa.Column("currency", sa.String(3)),
)
subscriptions = sa.Table(
    "shop_subscriptions",
    shop,
    sa.Column("subscription_id", sa.String(255), primary_key=True),
    sa.Column("customer_id", sa.String(255), nullable=False),
    sa.Column("status", sa.String(32), nullable=False),
)

# Receipts leave through the outbox. With SHOP_EMAIL_URL set (the demo starts a loopback mail
# service), they are POSTed there with an Idempotency-Key; without it they are only logged.
if os.environ.get("SHOP_EMAIL_URL"):
    inbox.add_destination(HTTPDestination("email", url=os.environ["SHOP_EMAIL_URL"], timeout=5))
else:

    @inbox.destination("email")
    def log_email(message: Message) -> None:
        log.info("would e-mail %s (key %s)", message.payload.get("to"), message.key)


@inbox.after_migrate
def create_shop_tables(connection: Connection) -> None:
    shop.create_all(connection)  # a real shop would use its own migrations


@inbox.handler("stripe", "checkout.session.completed", business_key="shop_orders.payment_id")
def create_order(event: Event, ctx: HandlerContext) -> None:
    session = event.payload["data"]["object"]
    ctx.db.execute(
        orders.insert().values(
            payment_id=session["payment_intent"],
            customer_id=session.get("customer"),
            email=session.get("customer_email"),
            amount=session.get("amount_total"),
            currency=session.get("currency"),
        )
    )
    # Sent with the order's transaction: no order, no e-mail; one order, one e-mail.
    ctx.outbox.send(
        "email",
        {
            "to": session.get("customer_email"),
            "template": "receipt",
            "payment": session["payment_intent"],
        },
        key=f"receipt:{session['payment_intent']}",
    )
    ctx.log.info("order created for %s", session["payment_intent"])


@inbox.handler("stripe", "customer.subscription.updated")
def update_subscription(event: Event, ctx: HandlerContext) -> None:
    subscription = event.payload["data"]["object"]
    customer = subscription["customer"]
    known = ctx.db.execute(sa.select(orders.c.id).where(orders.c.customer_id == customer)).first()
    if known is None:  # the update came before the checkout that creates the customer
        raise NotReady(f"no order for customer {customer} yet")
    key = f"stripe:subscription:{subscription['id']}"
    if not ctx.ordering.advance(key, event.payload["created"]):
        return  # an update newer than this one was applied already
    row = {"customer_id": customer, "status": subscription["status"]}
    updated = ctx.db.execute(
        subscriptions.update()
        .where(subscriptions.c.subscription_id == subscription["id"])
        .values(**row)
    )
    if updated.rowcount == 0:
        ctx.db.execute(subscriptions.insert().values(subscription_id=subscription["id"], **row))


def all_orders() -> list[dict[str, Any]]:
    """Every order, oldest first (the framework examples list them at GET /orders)."""
    with inbox.store.reading() as connection:
        rows = connection.execute(sa.select(orders).order_by(orders.c.id)).mappings()
        return [dict(row) for row in rows]
