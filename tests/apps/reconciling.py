"""An app whose Stripe source can reconcile: its API key and base come from the environment
(RECONCILE_STRIPE_API, the loopback imitation's URL). Each invoice.paid event applied adds a
row to `applied_invoices`, deliberately without a unique constraint: an event processed twice
shows as two rows. No handler takes `customer.created` (reconcile skips that type). Its
Shopify source has no events API to reconcile from: each `orders/create` applied adds a row to
`applied_orders`, as deliberately without a unique constraint."""

from __future__ import annotations

import os

import sqlalchemy as sa

from hookinbox import Event, HandlerContext, Inbox
from hookinbox.sources import Shopify, Stripe
from tests.support.listed import STRIPE_KEY

SECRET = "whsec_test_reconciling_app"
SHOPIFY_SECRET = "shpss_test_reconciling_app"

tables = sa.MetaData()
applied_invoices = sa.Table(
    "applied_invoices",
    tables,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("event_id", sa.String(255), nullable=False),
)
applied_orders = sa.Table(
    "applied_orders",
    tables,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("event_id", sa.String(255), nullable=False),
)


def build(database_url: str | None = None, api_base: str | None = None) -> Inbox:
    base = api_base or os.environ.get("RECONCILE_STRIPE_API", "http://127.0.0.1:9")
    inbox = Inbox(database_url)
    inbox.add_source(Stripe(secret=SECRET, api_key=STRIPE_KEY, api_base=base))
    inbox.add_source(Shopify(secret=SHOPIFY_SECRET))
    inbox.after_migrate(tables.create_all)

    @inbox.handler("stripe", "invoice.paid")
    def on_invoice(event: Event, ctx: HandlerContext) -> None:
        ctx.db.execute(applied_invoices.insert().values(event_id=event.id))

    @inbox.handler("shopify", "orders/create")
    def on_order(event: Event, ctx: HandlerContext) -> None:
        ctx.db.execute(applied_orders.insert().values(event_id=event.id))

    return inbox


inbox = build()
