"""The application each test-bed host serves: Stripe deliveries become rows of `ha_effects`.

The table has no unique key on purpose: an event applied twice would show as two rows, so
the check (tests/ha/verify.py) can count doubles. The row is written on `ctx.db`, in the
transaction that marks the event processed: exactly-once in effect is what the bed tests.
"""

from __future__ import annotations

import os

import sqlalchemy as sa
from sqlalchemy import Connection

from hookinbox import Event, HandlerContext, Inbox
from hookinbox.sources import Stripe

SECRET = "whsec_ha_test_bed"

inbox = Inbox(os.environ.get("HOOKINBOX_DATABASE_URL", "sqlite:///ha.db"))
inbox.add_source(Stripe(secret=SECRET))

tables = sa.MetaData()
effects = sa.Table(
    "ha_effects",
    tables,
    sa.Column("event_id", sa.String(255), nullable=False),
    sa.Column("host", sa.String(64), nullable=False),
    sa.Column("applied_at", sa.DateTime(timezone=True), server_default=sa.func.now()),
)


@inbox.after_migrate
def create_tables(connection: Connection) -> None:
    tables.create_all(connection)


@inbox.handler("stripe", "ha.test")
def apply(event: Event, ctx: HandlerContext) -> None:
    ctx.db.execute(effects.insert().values(event_id=event.id, host=os.environ["HA_HOST"]))
