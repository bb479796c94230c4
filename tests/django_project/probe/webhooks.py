"""The probe inbox: Stripe-signed events whose type says what the handler does after its write."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import sqlalchemy as sa
from django.db import IntegrityError, connection, transaction

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


@inbox.handler("stripe", "probe.business_key", business_key="probe_mark.name")
def write_a_business_key(event: Event, ctx: HandlerContext) -> None:
    # Through ctx.db, whose errors hookinbox reads: the second event of the same key is a
    # business duplicate (its write rolled back to the handler's savepoint), not a failure.
    key = event.payload["data"]["object"]["key"]
    ctx.db.execute(sa.text("INSERT INTO probe_mark (name) VALUES (:name)"), {"name": key})


@inbox.handler("stripe", "probe.session")
def record_the_session(event: Event, ctx: HandlerContext) -> None:
    # MariaDB only: the session as Django set it up, which hookinbox must leave alone.
    with connection.cursor() as cursor:
        cursor.execute("SELECT @@session.time_zone, @@session.tx_isolation")
        time_zone, isolation = cursor.fetchone()
    Mark.objects.create(name=f"{event.id} {time_zone} {isolation}")


@inbox.handler("stripe", "probe.deadlock")
def ignore_a_lost_deadlock(event: Event, ctx: HandlerContext) -> None:
    """MariaDB only: write, then lose a real deadlock through ctx.db, catch it and go on.

    InnoDB rolls the deadlock's victim back whole, the claim and the ORM write with it; the
    statements after it begin a new transaction. The rows `lock-a` and `lock-b` of probe_mark
    exist (the test wrote them); the other transaction is made the heavier, so that InnoDB
    picks this one."""
    _mark(event, ctx)
    lock = sa.text("SELECT id FROM probe_mark WHERE name = :name FOR UPDATE")
    ctx.db.execute(lock, {"name": "lock-a"})
    holding_b = threading.Event()
    other = threading.Thread(target=_lock_b_then_a, args=(holding_b,))
    other.start()
    try:
        if not holding_b.wait(30):
            raise AssertionError("the other transaction never locked lock-b")
        time.sleep(0.5)  # it waits for lock-a now
        try:
            ctx.db.execute(lock, {"name": "lock-b"})
        except sa.exc.OperationalError as error:
            if "Deadlock" not in str(error):
                raise
        else:
            raise AssertionError("no deadlock: InnoDB chose the other transaction")
    finally:
        other.join(30)


def _lock_b_then_a(holding_b: threading.Event) -> None:
    """Another transaction on a connection of its own (this thread's), rolled back at the end."""
    try:
        with transaction.atomic():
            # 200 rows written: InnoDB rolls back the transaction that wrote fewer, the handler's.
            Mark.objects.bulk_create([Mark(name=f"heavy-{n}") for n in range(200)])
            Mark.objects.select_for_update().get(name="lock-b")
            holding_b.set()
            Mark.objects.select_for_update().get(name="lock-a")
            transaction.set_rollback(True)
    finally:
        connection.close()
