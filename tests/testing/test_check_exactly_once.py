"""`check_exactly_once` against handlers with the three classic mistakes planted, and the
correct handler: each mistake must fail the check, the correct handler must pass it.

The shop here turns a paid payment into one order and one receipt e-mail. Two events carry
each payment (Stripe's `checkout.session.completed` and `payment_intent.succeeded`), and
every event is delivered three times, so a handler must dedupe both ways. Each shop is built
twice: sync handlers on a sync URL (the thread worker), and `async def` handlers writing
through `ctx.session()` on an async URL (the async worker, issue 46).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import Connection
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.orm import DeclarativeBase

from hookinbox import AsyncHandlerContext, Event, HandlerContext, Inbox, Message
from hookinbox.sources import Stripe
from hookinbox.testing import (
    ExactlyOnceViolation,
    WorkerStuck,
    _check,
    check_exactly_once,
    stripe_checkout_session,
    stripe_event,
)
from tests.conftest import POSTGRES_URL, async_twin

tables = sa.MetaData()
orders = sa.Table(
    "check_orders",
    tables,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("payment_id", sa.String(64), nullable=False, unique=True),
)
loose_orders = sa.Table(  # the same, without the unique constraint
    "check_loose_orders",
    tables,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("payment_id", sa.String(64), nullable=False),
)
PAYMENTS = ("pi_1", "pi_2")


def events(payments: tuple[str, ...] = PAYMENTS) -> list[tuple[str, dict[str, Any]]]:
    """Each payment twice: its checkout and its payment intent, two events of one effect."""
    found = []
    for payment in payments:
        found.append(
            ("stripe", stripe_event("checkout.session.completed",
                                    stripe_checkout_session(payment_intent=payment)))
        )  # fmt: skip
        found.append(
            ("stripe", stripe_event("payment_intent.succeeded",
                                    {"id": payment, "object": "payment_intent"}))
        )  # fmt: skip
    return found


def payment_of(event: Event) -> str:
    obj = event.payload["data"]["object"]
    return str(obj["payment_intent"] if event.type == "checkout.session.completed" else obj["id"])


class Base(DeclarativeBase):
    metadata = tables


class Order(Base):
    """`check_orders` as the async shop's ORM model."""

    __table__ = orders


class Shop:
    """An inbox whose handler is one of the variants below, and the e-mails it sent."""

    URL = "sqlite:///never-opened.db"

    def __init__(self, handler: str, ledger_url: str) -> None:
        self.emails: list[str] = []
        self.ledger = sa.create_engine(ledger_url, poolclass=sa.NullPool)
        tables.create_all(self.ledger)  # for the handler that writes on its own connection
        self.inbox = Inbox(self.URL, sources=[Stripe(secret="whsec_check")])
        self.inbox.after_migrate(tables.create_all)
        self.inbox.destination("email")(self.deliver_email)
        variant = getattr(self, handler)
        unique = handler != "check_then_insert"
        for event_type in ("checkout.session.completed", "payment_intent.succeeded"):
            key = "check_orders.payment_id" if unique and handler != "another_connection" else ()
            self.inbox.handler("stripe", event_type, business_key=key)(variant)

    def deliver_email(self, message: Message) -> None:
        self.emails.append(message.key)

    def reset(self) -> None:
        self.emails.clear()
        with self.ledger.begin() as connection:
            connection.execute(loose_orders.delete())

    # -- the correct handler ------------------------------------------------------------------

    def correct(self, event: Event, ctx: HandlerContext) -> None:
        payment = payment_of(event)
        ctx.db.execute(orders.insert().values(payment_id=payment))  # UNIQUE: a business key
        ctx.outbox.send("email", {"payment": payment}, key=f"email:{payment}")

    # -- the three mistakes -------------------------------------------------------------------

    def another_connection(self, event: Event, ctx: HandlerContext) -> None:
        payment = payment_of(event)
        with self.ledger.begin() as connection:  # not ctx.db: committed whatever happens next
            connection.execute(loose_orders.insert().values(payment_id=payment))
        ctx.outbox.send("email", {"payment": payment}, key=f"email:{payment}")

    def direct_call(self, event: Event, ctx: HandlerContext) -> None:
        payment = payment_of(event)
        ctx.db.execute(orders.insert().values(payment_id=payment))
        self.emails.append(f"email:{payment}")  # the mail service called now, not via outbox

    def check_then_insert(self, event: Event, ctx: HandlerContext) -> None:
        payment = payment_of(event)
        query = sa.select(loose_orders.c.id).where(loose_orders.c.payment_id == payment)
        if ctx.db.execute(query).first() is None:  # no constraint backs this check up
            ctx.db.execute(loose_orders.insert().values(payment_id=payment))
            ctx.outbox.send("email", {"payment": payment}, key=f"email:{payment}")

    def effects(self, connection: Connection) -> Iterator[str]:
        yield from connection.execute(sa.select(orders.c.payment_id)).scalars()
        yield from connection.execute(sa.select(loose_orders.c.payment_id)).scalars()
        with self.ledger.connect() as ledger:
            yield from ledger.execute(sa.select(loose_orders.c.payment_id)).scalars().all()
        yield from self.emails


class AsyncShop(Shop):
    """The same shop on an async URL: `async def` handlers on the async worker, writing
    through `ctx.session()` (the ORM) and `await ctx.db.execute`, the outbox awaited."""

    URL = "sqlite+aiosqlite:///never-opened.db"

    def __init__(self, handler: str, ledger_url: str) -> None:
        self.async_ledger_url = async_twin(ledger_url)
        super().__init__(handler, ledger_url)

    async def deliver_email(self, message: Message) -> None:  # type: ignore[override]
        self.emails.append(message.key)

    async def correct(self, event: Event, ctx: AsyncHandlerContext) -> None:  # type: ignore[override]
        payment = payment_of(event)
        async with ctx.session() as session:  # UNIQUE: a business key
            session.add(Order(payment_id=payment))
            await session.commit()
        await ctx.outbox.send("email", {"payment": payment}, key=f"email:{payment}")

    async def another_connection(self, event: Event, ctx: AsyncHandlerContext) -> None:  # type: ignore[override]
        payment = payment_of(event)
        # An engine per call: an AsyncEngine belongs to one event loop, and the check's two
        # worker threads run two. One engine shared by both hung now and then: SQLAlchemy
        # guards an engine's first connect with an asyncio lock, whose release from one
        # loop's thread never wakes the other loop waiting on it.
        ledger = create_async_engine(self.async_ledger_url, poolclass=sa.NullPool)
        try:
            async with ledger.begin() as connection:  # not ctx.db: committed at once
                await connection.execute(loose_orders.insert().values(payment_id=payment))
        finally:
            await ledger.dispose()
        await ctx.outbox.send("email", {"payment": payment}, key=f"email:{payment}")

    async def direct_call(self, event: Event, ctx: AsyncHandlerContext) -> None:  # type: ignore[override]
        payment = payment_of(event)
        async with ctx.session() as session:
            session.add(Order(payment_id=payment))
            await session.commit()
        self.emails.append(f"email:{payment}")  # the mail service called now, not via outbox

    async def check_then_insert(self, event: Event, ctx: AsyncHandlerContext) -> None:  # type: ignore[override]
        payment = payment_of(event)
        query = sa.select(loose_orders.c.id).where(loose_orders.c.payment_id == payment)
        if (await ctx.db.execute(query)).first() is None:  # no constraint backs this check up
            await ctx.db.execute(loose_orders.insert().values(payment_id=payment))
            await ctx.outbox.send("email", {"payment": payment}, key=f"email:{payment}")


@pytest.fixture(params=["sqlite", "postgres"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> str | None:
    """Where each schedule's database is made: SQLite files, or the PostgreSQL server."""
    if request.param == "sqlite":
        return None
    if not POSTGRES_URL:
        pytest.skip("HOOKINBOX_TEST_POSTGRES_URL is not set")
    return POSTGRES_URL


@pytest.fixture(params=["sync", "async"])
def shop_of(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[str], Shop]]:
    """The shop's sync handlers on the thread worker, or its async ones on the async worker."""
    made: list[Shop] = []
    kind = Shop if request.param == "sync" else AsyncShop

    def make(handler: str) -> Shop:
        made.append(kind(handler, f"sqlite:///{tmp_path / 'ledger.db'}"))
        return made[-1]

    yield make
    for shop in made:
        shop.ledger.dispose()


def doubled_only(violation: ExactlyOnceViolation) -> bool:
    """The violation is the planted double, every event processed: no handler failed (an
    async handler given a sync context would, and prove nothing)."""
    problems = violation.problems
    failed = [p for p in problems if " failed: " in p or " still " in p]
    return any("more than once" in p for p in problems) and not failed


def check(shop: Shop, server: str | None, **options: Any) -> object:
    payments = options.pop("payments", PAYMENTS)
    return check_exactly_once(
        shop.inbox,
        events(payments),
        effects=shop.effects,
        expected=[*payments, *(f"email:{p}" for p in payments)],
        database_url=server,
        reset=shop.reset,
        examples=options.pop("examples", 6),
        shrink_budget=3,  # a few: the shrinking itself is hypothesis', not under test here
        seed=1,
        **options,
    )


def test_the_correct_handler_passes(shop_of: Callable[[str], Shop], server: str | None) -> None:
    report = check(shop_of("correct"), server)
    assert report.schedules >= 6  # type: ignore[attr-defined]


@pytest.mark.slow  # seconds by design: `make test`, not `make test-fast`
@pytest.mark.parametrize("handler", ["another_connection", "direct_call"])
def test_a_write_or_a_call_outside_the_transaction_is_caught(
    shop_of: Callable[[str], Shop], server: str | None, handler: str
) -> None:
    with pytest.raises(ExactlyOnceViolation) as caught:
        check(shop_of(handler), server)
    assert doubled_only(caught.value), caught.value
    if handler == "direct_call":  # only a retried attempt calls twice: the death is in it
        assert "dies after its handlers, before commit" in caught.value.schedule


@pytest.mark.postgres
def test_a_check_then_insert_without_a_constraint_is_caught_on_postgresql(
    shop_of: Callable[[str], Shop],
) -> None:
    if not POSTGRES_URL:
        pytest.skip("HOOKINBOX_TEST_POSTGRES_URL is not set")
    with pytest.raises(ExactlyOnceViolation) as caught:
        # One payment, two copies of each of its events: what the search shrinks is smaller.
        check(shop_of("check_then_insert"), POSTGRES_URL, payments=("pi_1",), copies=2)
    assert doubled_only(caught.value), caught.value
    assert "2 worker(s)" in caught.value.schedule or "3 worker(s)" in caught.value.schedule


def test_without_hypothesis_random_schedules_catch_it_too(
    shop_of: Callable[[str], Shop],
) -> None:
    with pytest.raises(ExactlyOnceViolation, match="random search") as caught:
        check(shop_of("direct_call"), None, use_hypothesis=False)
    assert doubled_only(caught.value), caught.value


class LazyProxy:
    """An object whose `__class__` evaluates something, as Django's unconfigured `settings`
    raises on it: what `isinstance` asks for, and the report must not."""

    def __init__(self) -> None:
        self.evaluated = 0

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        self.evaluated += 1
        raise RuntimeError("a lazy proxy was evaluated")


def stuck_message(inbox: Inbox, release: threading.Event) -> str:
    """`WorkerStuck`'s message for a check of one payment whose handler waits until `release`
    is set (set here once the check gave up, and the check's threads let finish)."""
    try:
        with pytest.raises(WorkerStuck) as caught:
            check_exactly_once(
                inbox,
                [("stripe", stripe_event("payment_intent.succeeded", {"id": "pi_1"}))],
                effects=lambda connection: [],
                expected=["pi_1"],
                examples=5,
                seed=1,
                max_workers=2,
            )
    finally:
        release.set()
        for thread in threading.enumerate():  # let them finish before the test ends
            if thread.name.startswith("hookinbox-check-"):
                thread.join(30)
    return str(caught.value)


def test_a_worker_thread_that_never_returns_fails_the_check_naming_where_it_stands(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A hang becomes a failure with every thread's stack, not a run that never ends, and
    the search stops at the first one (hypothesis does not shrink it, schedule after
    schedule waiting out the stuck threads)."""
    monkeypatch.setattr(_check, "PROCESS_TIMEOUT", 0.2)
    monkeypatch.setattr(_check, "JOIN_GRACE", 0.8)
    release = threading.Event()
    calls: list[str] = []
    inbox = Inbox(Shop.URL, sources=[Stripe(secret="whsec_check")])

    @inbox.handler("stripe", "payment_intent.succeeded")
    def waits_forever(event: Event, ctx: HandlerContext) -> None:
        calls.append(event.id)
        release.wait(30)  # released below, once the check gave up on it

    message = stuck_message(inbox, release)
    assert "hookinbox-check-" in message and "still running 1 s" in message
    assert "in waits_forever" in message  # the stuck thread's stack names the handler
    assert len(calls) == 1  # the worst case only: nothing was run after the hang


def test_an_async_worker_that_waits_in_vain_is_shown_by_its_task(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On the async worker, a stuck thread's stack shows only its idle loop: the awaiting
    handler is found down the loop's tasks, and the message names it."""
    monkeypatch.setattr(_check, "PROCESS_TIMEOUT", 0.2)
    monkeypatch.setattr(_check, "JOIN_GRACE", 0.8)
    release = threading.Event()
    inbox = Inbox(AsyncShop.URL, sources=[Stripe(secret="whsec_check")])

    @inbox.handler("stripe", "payment_intent.succeeded")
    async def awaits_in_vain(event: Event, ctx: AsyncHandlerContext) -> None:
        while not release.is_set():  # released below, once the check gave up on it
            await asyncio.sleep(0.05)

    touchy = LazyProxy()  # alive while the message is made: found by gc, never evaluated
    message = stuck_message(inbox, release)
    assert touchy.evaluated == 0
    assert "every task of a live event loop" in message
    assert "in awaits_in_vain" in message.split("every task of a live event loop")[1]
