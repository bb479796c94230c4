"""hookinbox as the benchmarks run it: one Stripe source, one handler that writes one row."""

from __future__ import annotations

import os

import sqlalchemy as sa
from sqlalchemy import Connection

from bench._common import SECRET
from hookinbox import AsyncHandlerContext, Event, GroupCommit, HandlerContext, Inbox
from hookinbox.sources import Stripe

# The URL comes from `hookinbox serve --database-url`; BENCH_GROUP_COMMIT_WRITERS sets the
# number of group-commit writer threads (bench/ingest.py's "hookinbox-2w" peer).
_writers = os.environ.get("BENCH_GROUP_COMMIT_WRITERS")
inbox = Inbox(group_commit=GroupCommit(writers=int(_writers)) if _writers else True)
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


if inbox.is_async:  # an async URL (bench/async_worker.py): the same handler, awaited

    @inbox.handler("stripe", "checkout.session.completed")
    async def record_order_async(event: Event, ctx: AsyncHandlerContext) -> None:
        payment = event.payload["data"]["object"]["payment_intent"]
        await ctx.db.execute(orders.insert().values(payment_id=payment))

else:

    @inbox.handler("stripe", "checkout.session.completed")
    def record_order(event: Event, ctx: HandlerContext) -> None:
        payment = event.payload["data"]["object"]["payment_intent"]
        ctx.db.execute(orders.insert().values(payment_id=payment))
