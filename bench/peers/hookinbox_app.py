"""hookinbox as the benchmarks run it: one Stripe source, one handler that writes one row."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy import Connection

from bench._common import SECRET
from hookinbox import Event, HandlerContext, Inbox
from hookinbox.sources import Stripe

inbox = Inbox()  # the URL comes from `hookinbox serve --database-url`
inbox.add_source(Stripe(secret=SECRET))

tables = sa.MetaData()
orders = sa.Table(  # deliberately no UNIQUE: a doubled effect must be countable
    "bench_orders",
    tables,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True),
    sa.Column("payment_id", sa.String(64), nullable=False),
)


@inbox.after_migrate
def create_tables(connection: Connection) -> None:
    tables.create_all(connection)


@inbox.handler("stripe", "checkout.session.completed")
def record_order(event: Event, ctx: HandlerContext) -> None:
    payment = event.payload["data"]["object"]["payment_intent"]
    ctx.db.execute(orders.insert().values(payment_id=payment))
