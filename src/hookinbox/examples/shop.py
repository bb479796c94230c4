"""A small shop: Stripe payments become orders, exactly once. Copy it to start your own.

    hookinbox serve hookinbox.examples.shop:inbox      # HTTP on :8000 and a worker

What it shows:
- an `orders` table of the shop's own, with UNIQUE payment_id as the second safety net;
- `checkout.session.completed` creates the order in the transaction that marks the event done;
- `customer.subscription.updated` raises NotReady while its order is unknown (out of order),
  and skips stale updates with the ordering guard;
- Shopify, GitHub and Standard Webhooks deliveries are verified and stored (`unhandled`).

Secrets come from the environment; the defaults are for local trials only.
"""

from __future__ import annotations

import os

import sqlalchemy as sa
from sqlalchemy import Connection

from hookinbox import Event, HandlerContext, Inbox, NotReady
from hookinbox.sources import GitHub, Shopify, StandardWebhooks, Stripe

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
    sa.Column("amount", sa.Integer),
    sa.Column("currency", sa.String(3)),
    sa.Column("subscription_status", sa.String(32)),
)


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
            amount=session.get("amount_total"),
            currency=session.get("currency"),
        )
    )
    ctx.log.info("order created for %s", session["payment_intent"])


@inbox.handler("stripe", "customer.subscription.updated")
def update_subscription(event: Event, ctx: HandlerContext) -> None:
    subscription = event.payload["data"]["object"]
    customer = subscription["customer"]
    known = ctx.db.execute(sa.select(orders.c.id).where(orders.c.customer_id == customer)).first()
    if known is None:
        raise NotReady(f"no order for customer {customer} yet")
    if not ctx.ordering.advance(
        f"stripe:subscription:{subscription['id']}", event.payload["created"]
    ):
        return  # an update newer than this one was applied already
    ctx.db.execute(
        orders.update()
        .where(orders.c.customer_id == customer)
        .values(subscription_status=subscription["status"])
    )
