"""The probe inbox: Stripe-signed events whose type says what the handler does after its write."""

from __future__ import annotations

import time
from pathlib import Path

import sqlalchemy as sa
from django.db import IntegrityError

from hookinbox import Event, HandlerContext
from hookinbox.django import DjangoInbox
from hookinbox.sources import Stripe
from tests.django_project import SECRET
from tests.django_project.probe.models import Mark

inbox = DjangoInbox()
inbox.add_source(Stripe(secret=SECRET))
inbox.add_source(Stripe(secret=SECRET, name="inline"), inline=True)


def _mark(event: Event, ctx: HandlerContext) -> None:
    Mark.objects.create(name=event.id)
    # The ORM's uncommitted row is visible on ctx.db: one connection, one transaction.
    seen = ctx.db.execute(
        sa.text("SELECT count(*) FROM probe_mark WHERE name = :name"), {"name": event.id}
    ).scalar()
    if seen != 1:
        raise AssertionError(f"ctx.db does not see the ORM's write ({seen} rows)")


for source in ("stripe", "inline"):

    @inbox.handler(source, "probe.commit")
    def commit(event: Event, ctx: HandlerContext) -> None:
        _mark(event, ctx)

    @inbox.handler(source, "probe.raise")
    def raise_after_write(event: Event, ctx: HandlerContext) -> None:
        _mark(event, ctx)
        raise RuntimeError("raised after the ORM write")


@inbox.handler("stripe", "probe.hang")
def hang_after_write(event: Event, ctx: HandlerContext) -> None:
    _mark(event, ctx)
    Path(event.payload["data"]["object"]["ready_file"]).touch()  # the test SIGKILLs us now
    time.sleep(60)


@inbox.handler("stripe", "probe.swallow")
def swallow_an_orm_error(event: Event, ctx: HandlerContext) -> None:
    _mark(event, ctx)
    try:
        Mark.objects.create(name=event.id)  # a duplicate, caught without atomic() of its own
    except IntegrityError:
        pass
