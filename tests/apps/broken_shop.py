"""A deliberately broken shop, for proving that `hookinbox demo` can fail.

Two handlers create the order for one checkout (a new one was added and the legacy one never
removed), and the table has no UNIQUE payment_id to catch it: every order is doubled. The
inbox processes each event exactly once; it cannot save handlers that apply their effect
twice themselves. The demo's check must see it.
"""

from __future__ import annotations

import os

import sqlalchemy as sa
from sqlalchemy import Connection

from hookinbox import Event, HandlerContext, Inbox
from hookinbox.sources import Stripe

inbox = Inbox()
inbox.add_source(Stripe(secret=os.environ.get("STRIPE_WEBHOOK_SECRET", "whsec_local_trial")))

tables = sa.MetaData()
orders = sa.Table(  # no UNIQUE payment_id: the second safety net is missing too
    "shop_orders",
    tables,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("payment_id", sa.String(255), nullable=False),
    sa.Column("customer_id", sa.String(255)),
)
subscriptions = sa.Table(
    "shop_subscriptions",
    tables,
    sa.Column("subscription_id", sa.String(255), primary_key=True),
    sa.Column("customer_id", sa.String(255), nullable=False),
    sa.Column("status", sa.String(32), nullable=False),
)


@inbox.after_migrate
def create_tables(connection: Connection) -> None:
    tables.create_all(connection)


def insert_order(event: Event, ctx: HandlerContext) -> None:
    session = event.payload["data"]["object"]
    row = {"payment_id": session["payment_intent"], "customer_id": session.get("customer")}
    ctx.db.execute(orders.insert().values(**row))


@inbox.handler("stripe", "checkout.session.completed")
def create_order(event: Event, ctx: HandlerContext) -> None:
    insert_order(event, ctx)


@inbox.handler("stripe", "checkout.session.completed")
def legacy_create_order(event: Event, ctx: HandlerContext) -> None:  # never removed
    insert_order(event, ctx)
