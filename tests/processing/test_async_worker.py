"""What only the async worker has: an `AsyncConnection` and `AsyncSession` in the claim's
transaction, running in an application's event loop, the rules between sync and async, a
blocked loop noticed, and a shutdown that cuts attempts off without doubling them.

The exactly-once suites of tests/processing and tests/outbox run on the async worker too (the
`driver` parameter, tests/conftest.py); these cases are its own.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from hookinbox import (
    AsyncHandlerContext,
    AsyncWorker,
    ConfigurationError,
    Event,
    HandlerContext,
    Inbox,
    MissingExtra,
    Status,
    WorkerOptions,
)
from hookinbox.sources import Stripe
from tests.processing.conftest import checkout
from tests.support.signing import stripe_delivery

SECRET = "whsec_async_worker"


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    """The databases with an async driver in hookinbox (MariaDB has none: docs/async.md)."""
    return str(request.param)


@pytest.fixture(params=["sync"])
def driver(request: pytest.FixtureRequest) -> str:
    """These cases name the async driver themselves (`async_url`)."""
    return str(request.param)


class Base(DeclarativeBase):
    pass


class Payment(Base):
    __tablename__ = "async_payments"
    id: Mapped[int] = mapped_column(primary_key=True)
    payment_id: Mapped[str] = mapped_column(sa.String(64), unique=True)
    event_id: Mapped[str] = mapped_column(sa.String(64))


@pytest.fixture
def async_url(db_url: str) -> str:
    from tests.conftest import async_twin

    return async_twin(db_url)


@pytest.fixture
def inbox(async_url: str) -> Iterator[Inbox]:
    inbox = Inbox(async_url, retry=None)
    inbox.add_source(Stripe(secret=SECRET))
    inbox.after_migrate(Base.metadata.create_all)
    inbox.migrate()
    yield inbox
    inbox.close()


def deliver(inbox: Inbox, event: dict[str, Any]) -> None:
    headers, body = stripe_delivery(event, SECRET)
    assert inbox.receive("stripe", headers, body).ok


def payments(inbox: Inbox) -> list[str]:
    with inbox.store.reading() as connection:
        return sorted(connection.execute(sa.select(Payment.event_id)).scalars())


def status(inbox: Inbox, event_id: str) -> Event:
    event = inbox.store.get_event("stripe", event_id)
    assert event is not None
    return event


def test_an_async_session_on_ctx_db_commits_and_rolls_back_with_the_claim(inbox: Inbox) -> None:
    """The write made through the session and the processed mark are one transaction: a
    handler error after the session's commit takes both back, and the event is retried."""

    @inbox.handler("stripe", "*", business_key="async_payments.payment_id")
    async def record(event: Event, ctx: AsyncHandlerContext) -> None:
        assert isinstance(ctx, AsyncHandlerContext)
        async with ctx.session() as session:
            payment = event.payload["data"]["object"]["payment_intent"]
            session.add(Payment(payment_id=payment, event_id=event.id))
            await session.commit()
        if event.payload["data"]["object"].get("fail"):
            raise RuntimeError("raised after the session's commit")

    deliver(inbox, checkout(1))
    deliver(inbox, checkout(2, payment="pi_1"))  # the same payment: a business duplicate
    failing = checkout(3)
    failing["data"]["object"]["fail"] = True  # type: ignore[index]
    deliver(inbox, failing)
    assert inbox.process_due() == 3
    assert payments(inbox) == ["evt_1"]
    assert (status(inbox, "evt_1").status, status(inbox, "evt_1").outcome) == (
        Status.PROCESSED,
        "handled",
    )
    assert status(inbox, "evt_2").outcome == "business_duplicate"
    failed = status(inbox, "evt_3")
    assert (failed.status, failed.attempts) == (Status.PENDING, 1)
    assert (failed.last_error or "").startswith("RuntimeError: raised after the session's commit")


def test_a_session_that_rolls_back_drops_only_its_own_writes(inbox: Inbox) -> None:
    """`ctx.session()` is an ordinary session inside the transaction: its rollback drops what
    it wrote, not what was written on ctx.db before it, nor the claim."""

    @inbox.handler("stripe", "*")
    async def record(event: Event, ctx: AsyncHandlerContext) -> None:
        await ctx.db.execute(
            sa.insert(Payment).values(payment_id=f"db_{event.id}", event_id=event.id)
        )
        async with ctx.session() as session:
            session.add(Payment(payment_id=f"orm_{event.id}", event_id="dropped"))
            await session.flush()
            await session.rollback()

    deliver(inbox, checkout(1))
    assert inbox.process_due() == 1
    assert payments(inbox) == ["evt_1"]
    assert status(inbox, "evt_1").status is Status.PROCESSED


def test_a_plain_handler_runs_in_the_same_transaction(inbox: Inbox) -> None:
    """A sync handler on an async inbox gets a `HandlerContext` on the same connection
    (`run_sync`): its write and an async handler's commit or roll back together."""
    seen: list[type] = []

    @inbox.handler("stripe", "*")
    def plain(event: Event, ctx: HandlerContext) -> None:
        seen.append(type(ctx))
        ctx.db.execute(sa.insert(Payment).values(payment_id=f"p_{event.id}", event_id=event.id))
        assert ctx.ordering.advance(f"object:{event.id}", 1)
        ctx.outbox.send("mail", {"event": event.id})

    @inbox.handler("stripe", "*")
    async def then_fails_once(event: Event, ctx: AsyncHandlerContext) -> None:
        seen.append(type(ctx))
        if ctx.attempt == 1:
            raise RuntimeError("the second handler failed")

    sent: list[str] = []

    @inbox.destination("mail")
    async def mail(message: Any) -> None:
        sent.append(message.payload["event"])

    deliver(inbox, checkout(1))
    inbox.process_due()
    assert payments(inbox) == []  # rolled back with the async handler's failure
    assert sent == []
    assert seen == [HandlerContext, AsyncHandlerContext]
    event = status(inbox, "evt_1")
    with inbox.store.transaction() as connection:  # due now, to try again at once
        connection.execute(sa.text("UPDATE hookinbox_event_queue SET next_attempt_at = :t"),
                           {"t": event.received_at})  # fmt: skip
    inbox.process_due()
    assert payments(inbox) == ["evt_1"]
    assert sent == ["evt_1"]
    assert status(inbox, "evt_1").status is Status.PROCESSED


def test_the_async_context_awaits_ordering_and_the_outbox(inbox: Inbox) -> None:
    applied: list[str] = []
    sent: list[str] = []

    @inbox.destination("mail")
    def mail(message: Any) -> None:  # a plain destination: called in a thread
        sent.append(message.key)

    @inbox.handler("stripe", "*")
    async def guarded(event: Event, ctx: AsyncHandlerContext) -> None:
        if await ctx.ordering.advance("sub_1", int(event.payload["created"])):
            applied.append(event.id)
            await ctx.outbox.send("mail", {"event": event.id}, key=f"mail:{event.id}")

    newer, older = checkout(2), checkout(1)
    older["created"] = int(newer["created"]) - 10  # type: ignore[call-overload]
    deliver(inbox, newer)
    deliver(inbox, older)
    assert inbox.process_due() == 3  # two events, and the one message sent
    assert applied == ["evt_2"]  # the older update arrived second: skipped
    assert sent == ["mail:evt_2"]


def test_running_in_the_applications_loop_processes_and_stops_cleanly(inbox: Inbox) -> None:
    processed: list[str] = []

    @inbox.handler("stripe", "*")
    async def record(event: Event, ctx: AsyncHandlerContext) -> None:
        await ctx.db.execute(sa.insert(Payment).values(payment_id=event.id, event_id=event.id))
        processed.append(event.id)

    async def main() -> None:
        async with inbox.running(WorkerOptions(poll_interval=0.05)) as worker:
            assert isinstance(worker, AsyncWorker)
            for number in range(5):  # ingest in a thread, as a server's would be
                await asyncio.to_thread(deliver, inbox, checkout(number))
            deadline = time.monotonic() + 20
            while len(processed) < 5:
                assert time.monotonic() < deadline, processed
                await asyncio.sleep(0.02)
        await inbox.aclose()

    asyncio.run(main())
    assert sorted(processed) == [f"evt_{n}" for n in range(5)]
    assert payments(inbox) == sorted(processed)


def test_running_a_sync_inbox_runs_the_thread_worker(db_url: str) -> None:
    inbox = Inbox(db_url)
    inbox.add_source(Stripe(secret=SECRET))
    done: list[str] = []

    @inbox.handler("stripe", "*")
    def record(event: Event, ctx: HandlerContext) -> None:
        done.append(event.id)

    async def main() -> None:
        async with inbox.running() as worker:
            assert not isinstance(worker, AsyncWorker)
            await asyncio.to_thread(deliver, inbox, checkout(1))
            deadline = time.monotonic() + 20
            while not done:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.02)

    asyncio.run(main())
    inbox.close()
    assert done == ["evt_1"]


def test_a_shutdown_past_the_grace_period_gives_attempts_back_without_doubling(
    inbox: Inbox,
) -> None:
    """A handler still running at the end of the grace period is cancelled: its transaction
    rolls back, and the event is given back due at once with no attempt counted."""
    started = asyncio.Event()

    @inbox.handler("stripe", "*")
    async def slow(event: Event, ctx: AsyncHandlerContext) -> None:
        await ctx.db.execute(sa.insert(Payment).values(payment_id=event.id, event_id=event.id))
        started.set()
        await asyncio.sleep(30)

    deliver(inbox, checkout(1))

    async def main() -> None:
        async with inbox.running(WorkerOptions(grace_period=0.5, poll_interval=0.05)):
            await asyncio.wait_for(started.wait(), 20)
        await inbox.aclose()

    begun = time.monotonic()
    asyncio.run(main())
    assert time.monotonic() - begun < 10
    event = status(inbox, "evt_1")
    assert (event.status, event.attempts) == (Status.PENDING, 0)
    assert event.next_attempt_at is not None
    assert event.next_attempt_at <= datetime.now(UTC)  # due again at once
    assert payments(inbox) == []  # the cancelled attempt's write rolled back


def test_a_handler_that_blocks_the_loop_is_named_and_its_neighbours_given_back(
    inbox: Inbox, caplog: pytest.LogCaptureFixture
) -> None:
    """time.sleep() in an async handler stops every task of the loop; the watchdog names the
    handler and gives back what the worker leased but had not started."""

    @inbox.handler("stripe", "*")
    async def blocks_the_loop(event: Event, ctx: AsyncHandlerContext) -> None:
        if event.id == "evt_0":
            time.sleep(2.5)  # the mistake: a blocking call on the event loop

    for number in range(4):
        deliver(inbox, checkout(number))

    async def main() -> None:
        options = WorkerOptions(concurrency=1, poll_interval=0.05)
        async with inbox.running(options):
            deadline = time.monotonic() + 30
            while not all(status(inbox, f"evt_{n}").status is Status.PROCESSED for n in range(4)):
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
        await inbox.aclose()

    with caplog.at_level(logging.WARNING, logger="hookinbox.worker"):
        asyncio.run(main())
    messages = [record.getMessage() for record in caplog.records]
    blocked = [m for m in messages if "event loop has been blocked" in m]
    assert blocked, messages
    assert "handler" in blocked[0] and "blocks_the_loop" in blocked[0]
    assert "1 held item(s) given back" in blocked[0]  # concurrency 1: one running, one held
    assert all(status(inbox, f"evt_{n}").attempts == 1 for n in range(4))  # none doubled


def test_the_two_workers_refuse_the_other_kind_of_url(db_url: str, async_url: str) -> None:
    sync, asynchronous = Inbox(db_url), Inbox(async_url)
    with pytest.raises(ConfigurationError, match="names an async driver"):
        asynchronous.worker()
    with pytest.raises(ConfigurationError, match="needs an async database URL"):
        sync.async_worker()
    assert asynchronous.is_async and not sync.is_async

    async def inside_a_loop() -> None:
        with pytest.raises(ConfigurationError, match=r"await inbox\.aprocess_due"):
            asynchronous.process_due()

    asyncio.run(inside_a_loop())


def test_an_async_driver_that_is_not_installed_is_one_line(
    async_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hookinbox._extras

    missing = {"asyncpg", "aiosqlite"}
    real = hookinbox._extras.installed
    monkeypatch.setattr(hookinbox._extras, "installed", lambda m: m not in missing and real(m))
    with pytest.raises(MissingExtra) as refused:
        Inbox(async_url)
    message = str(refused.value)
    assert "\n" not in message
    assert "pip install" in message and ("hookinbox[asyncpg]" in message or "aiosqlite" in message)


@pytest.mark.parametrize("backend", ["postgres"])
@pytest.mark.parametrize("worker_driver", ["sync", "async"])
def test_running_waits_for_a_database_unreachable_at_start(
    db_url: str, worker_driver: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An application that starts while its database is away keeps starting: the worker in
    its lifespan tries again until the database answers, then processes what is due."""
    from sqlalchemy.engine import make_url

    from tests.conftest import async_twin
    from tests.support.tcp_proxy import proxy_to

    receiving = Inbox(db_url)
    receiving.add_source(Stripe(secret=SECRET))
    deliver(receiving, checkout(1))
    receiving.close()
    parsed = make_url(db_url)
    done: list[str] = []
    with proxy_to(parsed.host or "127.0.0.1", parsed.port or 5432) as proxy:
        through = parsed.set(host="127.0.0.1", port=proxy.port).render_as_string(False)
        inbox = Inbox(async_twin(through) if worker_driver == "async" else through)
        inbox.add_source(Stripe(secret=SECRET))

        @inbox.handler("stripe", "*")
        def record(event: Event, ctx: HandlerContext) -> None:
            done.append(event.id)

        async def main() -> None:
            proxy.cut(2.5)  # down when the application starts
            async with inbox.running(WorkerOptions(poll_interval=0.1)):
                deadline = time.monotonic() + 30
                while not done:
                    assert time.monotonic() < deadline, "never processed"
                    await asyncio.sleep(0.05)
            await inbox.aclose()

        with caplog.at_level(logging.WARNING, logger="hookinbox.worker"):
            asyncio.run(main())
    assert done == ["evt_1"]
    assert any("cannot start yet" in record.getMessage() for record in caplog.records)


def test_process_due_from_several_threads_at_once(inbox: Inbox) -> None:
    """Each call runs an async worker on a loop of its own, with a pool of its own: none
    waits on another's loop, and none closes a pool under another."""
    import threading

    done: list[str] = []

    @inbox.handler("stripe", "*")
    async def record(event: Event, ctx: AsyncHandlerContext) -> None:
        await ctx.db.execute(sa.insert(Payment).values(payment_id=event.id, event_id=event.id))
        done.append(event.id)

    for number in range(40):
        deliver(inbox, checkout(number))
    errors: list[BaseException] = []

    def work() -> None:
        try:
            inbox.process_due()
        except BaseException as error:  # the test reports it
            errors.append(error)

    threads = [threading.Thread(target=work, daemon=True) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads), "process_due() hung"
    assert errors == []
    assert sorted(done) == sorted(f"evt_{n}" for n in range(40))  # each once
    assert len(payments(inbox)) == 40


def test_aprocess_due_on_one_loop_after_another(inbox: Inbox) -> None:
    @inbox.handler("stripe", "*")
    async def record(event: Event, ctx: AsyncHandlerContext) -> None:
        await ctx.db.execute(sa.insert(Payment).values(payment_id=event.id, event_id=event.id))

    for round_ in range(3):
        deliver(inbox, checkout(round_))
        assert asyncio.run(inbox.aprocess_due()) == 1  # a new loop each time: no stale pool
    assert len(payments(inbox)) == 3
