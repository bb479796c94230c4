"""The kit on an async inbox (issue 46): the copy keeps the async driver (aiosqlite, asyncpg in
a scratch schema), `run_due()` and `await arun_due()` run the async worker, whose handlers get
an `AsyncHandlerContext` and an `AsyncSession` in the claim's transaction; the harness's close
releases the async pool; the check's injected death rolls the async transaction back.

The app is an async shop, as docs/async.md builds one: an ORM `Order` per payment (a unique
payment id, the business key), a receipt through the outbox, subscription updates that wait
(NotReady) for their order.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from hookinbox import (
    AsyncHandlerContext,
    ConfigurationError,
    Event,
    Inbox,
    Message,
    NotReady,
    Status,
)
from hookinbox.sources import Stripe
from hookinbox.testing import (
    InboxHarness,
    stripe_checkout_session,
    stripe_event,
    stripe_subscription,
)
from tests.conftest import POSTGRES_URL, REQUIRE_POSTGRES, _admin_engine


class Base(DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = "async_kit_orders"
    id: Mapped[int] = mapped_column(primary_key=True)
    payment_id: Mapped[str] = mapped_column(sa.String(64), unique=True)
    customer: Mapped[str] = mapped_column(sa.String(64))


class Subscription(Base):
    __tablename__ = "async_kit_subscriptions"
    id: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    status: Mapped[str] = mapped_column(sa.String(32))


class AsyncShop:
    """An inbox on an async URL whose handlers are `async def` and write through the ORM."""

    def __init__(self, url: str = "sqlite+aiosqlite:///never-opened.db") -> None:
        self.receipts: list[str] = []
        self.contexts: list[str] = []
        self.schemas: list[str] = []
        self.inbox = Inbox(url, sources=[Stripe(secret="whsec_async_kit")])
        self.inbox.after_migrate(Base.metadata.create_all)
        self.inbox.destination("email")(self.send_receipt)
        key = "async_kit_orders.payment_id"
        self.inbox.handler("stripe", "checkout.session.completed", business_key=key)(self.order)
        self.inbox.handler("stripe", "customer.subscription.updated")(self.subscription)

    async def send_receipt(self, message: Message) -> None:
        self.receipts.append(message.key)

    async def order(self, event: Event, ctx: AsyncHandlerContext) -> None:
        self.contexts.append(type(ctx).__name__)
        if ctx.db.dialect.name == "postgresql":
            self.schemas.append(
                str((await ctx.db.execute(sa.text("SELECT current_schema()"))).scalar())
            )
        checkout = event.payload["data"]["object"]
        payment = checkout["payment_intent"]
        async with ctx.session() as session:
            session.add(Order(payment_id=payment, customer=checkout["customer"]))
            await session.commit()
        await ctx.outbox.send("email", {"payment": payment}, key=f"receipt:{payment}")

    async def subscription(self, event: Event, ctx: AsyncHandlerContext) -> None:
        update = event.payload["data"]["object"]
        async with ctx.session() as session:
            known = await session.scalar(
                sa.select(Order.id).where(Order.customer == update["customer"])
            )
            if known is None:
                raise NotReady(f"no order for {update['customer']} yet")
            await session.merge(Subscription(id=update["id"], status=update["status"]))
            await session.commit()


def orders(harness: InboxHarness) -> list[tuple[str, str]]:
    with harness.inbox.store.reading() as connection:
        query = sa.select(Order.payment_id, Order.customer).order_by(Order.id)
        return [(row[0], row[1]) for row in connection.execute(query)]


def subscriptions(harness: InboxHarness) -> list[tuple[str, str]]:
    with harness.inbox.store.reading() as connection:
        query = sa.select(Subscription.id, Subscription.status)
        return [(row[0], row[1]) for row in connection.execute(query)]


def checkout(payment: str, customer: str = "cus_1") -> dict[str, Any]:
    session = stripe_checkout_session(payment_intent=payment, customer=customer)
    return stripe_event("checkout.session.completed", session)


def postgres() -> str:
    if not POSTGRES_URL:
        if REQUIRE_POSTGRES:
            pytest.fail("HOOKINBOX_TEST_POSTGRES_URL is not set")
        pytest.skip("HOOKINBOX_TEST_POSTGRES_URL is not set")
    return POSTGRES_URL


def asyncpg(url: str, **query: str) -> str:
    return (
        make_url(url)
        .set(drivername="postgresql+asyncpg")
        .update_query_dict(query)
        .render_as_string(hide_password=False)
    )


@pytest.fixture
def shop() -> AsyncShop:
    return AsyncShop()


@pytest.fixture
def hookinbox_app(shop: AsyncShop) -> Inbox:
    return shop.inbox


@pytest.fixture(params=["sqlite", pytest.param("asyncpg", marks=pytest.mark.postgres)])
def hookinbox_database(request: pytest.FixtureRequest) -> str | None:
    """The plugin's default (a SQLite file: the copy of an async app takes aiosqlite), or the
    test server named with asyncpg, as `--hookinbox-db postgresql+asyncpg://...` names it."""
    if request.param == "sqlite":
        return None
    return asyncpg(postgres())


# -- the harness and the plugin's fixtures -------------------------------------------------------


def test_the_copy_of_an_async_app_runs_on_the_async_worker(
    hookinbox: InboxHarness, deliver: Any, run_due: Any, shop: AsyncShop
) -> None:
    assert hookinbox.inbox.is_async
    driver = make_url(hookinbox.database_url).drivername
    assert driver in ("sqlite+aiosqlite", "postgresql+asyncpg"), hookinbox.database_url
    answers = deliver("stripe", checkout("pi_1"), copies=3, concurrently=True)
    assert sorted(a.status for a in answers) == ["accepted", "duplicate", "duplicate"]
    assert run_due() == 2  # the event, then its receipt
    assert shop.contexts == ["AsyncHandlerContext"]
    assert orders(hookinbox) == [("pi_1", "cus_1")]
    assert shop.receipts == ["receipt:pi_1"]
    if driver.startswith("postgresql"):  # the handler's connection is in the scratch schema
        assert shop.schemas and shop.schemas[0].startswith("hookinbox_test_")


def test_a_second_event_for_a_paid_payment_is_a_business_duplicate(
    hookinbox: InboxHarness, deliver: Any, run_due: Any, shop: AsyncShop
) -> None:
    first, second = checkout("pi_7"), checkout("pi_7", customer="cus_2")
    deliver("stripe", first)
    deliver("stripe", second)
    assert run_due() == 3  # two events, one receipt: the duplicate's message went with it
    assert orders(hookinbox) == [("pi_7", "cus_1")]
    stored = hookinbox.event("stripe", second["id"])
    assert stored is not None and stored.outcome == "business_duplicate"
    assert shop.receipts == ["receipt:pi_7"]


def test_an_update_waits_for_its_order_without_sleeping(
    hookinbox: InboxHarness, deliver: Any, run_due: Any
) -> None:
    update = stripe_event(
        "customer.subscription.updated", stripe_subscription(id="sub_1", customer="cus_9")
    )
    deliver("stripe", update)
    run_due()
    deferred = hookinbox.event("stripe", update["id"])
    assert deferred is not None and deferred.status is Status.DEFERRED
    deliver("stripe", checkout("pi_9", customer="cus_9"))
    run_due()
    assert subscriptions(hookinbox) == []  # the update's retry is not due yet
    hookinbox.advance(60)
    assert subscriptions(hookinbox) == [("sub_1", "active")]


def test_an_async_test_awaits_deliveries_and_processing_on_its_own_loop(
    hookinbox: InboxHarness, shop: AsyncShop
) -> None:
    async def scenario() -> None:
        answers = await hookinbox.adeliver("stripe", checkout("pi_3"), copies=2, concurrently=True)
        assert sorted(str(a.status) for a in answers) == ["accepted", "duplicate"]
        with pytest.raises(ConfigurationError, match=r"await its arun_due\(\)"):
            hookinbox.run_due()  # inside a running loop: said in one line, nothing run
        assert await hookinbox.arun_due() == 2
        update = stripe_event("customer.subscription.updated", stripe_subscription(id="sub_3"))
        await hookinbox.adeliver("stripe", update)
        assert await hookinbox.arun_due() == 1  # its order's customer is not cus_1's: deferred
        assert await hookinbox.aadvance(60) == 1

    asyncio.run(scenario())
    assert orders(hookinbox) == [("pi_3", "cus_1")]
    assert shop.receipts == ["receipt:pi_3"]
    asyncio.run(hookinbox.arun_due())  # a second loop, after the first one closed: no pool kept


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_an_async_test_under_anyios_plugin_awaits_the_harness(
    hookinbox: InboxHarness, shop: AsyncShop
) -> None:
    await hookinbox.adeliver("stripe", checkout("pi_8"), copies=2, concurrently=True)
    assert await hookinbox.arun_due() == 2
    assert orders(hookinbox) == [("pi_8", "cus_1")]
    assert shop.contexts == ["AsyncHandlerContext"]


def test_the_worker_runs_beside_an_async_test_as_in_the_apps_lifespan(
    hookinbox: InboxHarness, shop: AsyncShop
) -> None:
    async def scenario() -> None:
        async with hookinbox.inbox.running():
            for payment in ("pi_a", "pi_b"):
                await hookinbox.adeliver("stripe", checkout(payment, customer=payment))
            while len(shop.receipts) < 2:  # the worker processes meanwhile, on this loop
                await asyncio.sleep(0.02)

    asyncio.run(asyncio.wait_for(scenario(), 30))
    assert sorted(orders(hookinbox)) == [("pi_a", "pi_a"), ("pi_b", "pi_b")]
    assert sorted(shop.receipts) == ["receipt:pi_a", "receipt:pi_b"]


@pytest.mark.postgres
def test_an_async_apps_copy_on_a_sync_server_url_takes_its_async_driver(shop: AsyncShop) -> None:
    """`--hookinbox-db postgresql://...`, as a project's sync tests give it: the copy runs on
    asyncpg (the app's driver), in the scratch schema, and its handlers get the async context."""
    with InboxHarness(shop.inbox, database_url=postgres()) as harness:
        assert make_url(harness.database_url).drivername == "postgresql+asyncpg"
        harness.deliver("stripe", checkout("pi_6"))
        assert harness.run_due() == 2
    assert shop.contexts == ["AsyncHandlerContext"]
    assert shop.schemas[0].startswith("hookinbox_test_")


def test_a_sync_app_stays_sync_unless_the_database_url_names_an_async_driver(
    tmp_path: Path,
) -> None:
    sync_app = Inbox("sqlite:///never-opened.db", sources=[Stripe(secret="whsec_x")])
    with InboxHarness(sync_app) as harness:
        assert not harness.inbox.is_async
        assert make_url(harness.database_url).drivername == "sqlite"
    url = f"sqlite+aiosqlite:///{tmp_path / 'chosen.db'}"
    with InboxHarness(sync_app, database_url=url) as harness:
        assert harness.inbox.is_async and harness.database_url == url
        assert asyncio.run(harness.arun_due()) == 0


def test_an_async_app_on_a_database_without_an_async_driver_is_refused_in_one_line(
    shop: AsyncShop,
) -> None:
    with pytest.raises(ConfigurationError) as refused:
        InboxHarness(shop.inbox, database_url="mysql://root@127.0.0.1:1/never")
    message = str(refused.value)
    assert "\n" not in message and "async" in message and "mysql" in message


# -- the async pool, released -------------------------------------------------------------------


def sessions_on(database_url: str) -> int:
    admin = _admin_engine()
    try:
        with admin.connect() as connection:
            query = "SELECT count(*) FROM pg_stat_activity WHERE datname = :name"
            name = make_url(database_url).database
            return int(connection.execute(sa.text(query), {"name": name}).scalar_one())
    finally:
        admin.dispose()


def aiosqlite_connections() -> int:
    """aiosqlite's connections alive in this process: a thread each."""
    return sum("_connection_worker_thread" in t.name for t in threading.enumerate())


async def process_directly(harness: InboxHarness) -> None:
    """The copy's own `aprocess_due()`, as an async test may call it."""
    await harness.adeliver("stripe", checkout("pi_4"))
    assert await harness.inbox.aprocess_due() == 2
    assert orders(harness) == [("pi_4", "cus_1")]


def test_aprocess_due_leaves_no_aiosqlite_connection_open(shop: AsyncShop) -> None:
    """Each async worker's pool is released on its loop before that loop ends."""
    before = aiosqlite_connections()
    harness = InboxHarness(shop.inbox)
    asyncio.run(process_directly(harness))
    assert aiosqlite_connections() == before
    harness.close()
    assert aiosqlite_connections() == before


@pytest.fixture
def own_database(request: pytest.FixtureRequest) -> Iterator[str]:
    """A database of this test's own on the test server: its sessions can be counted."""
    from tests.conftest import _postgres_database

    request.getfixturevalue("postgres_template")  # skips or fails like the other tests
    yield from _postgres_database(None)


@pytest.mark.postgres
def test_aprocess_due_leaves_no_asyncpg_session_open(shop: AsyncShop, own_database: str) -> None:
    """asyncpg's connections close only on their own loop: they are, before it ends. (The
    sessions counted before are ingest's: group commit's writer keeps its own.)"""

    async def in_one_loop() -> None:
        async with InboxHarness(shop.inbox, database_url=asyncpg(own_database)) as harness:
            await harness.adeliver("stripe", checkout("pi_4"))
            before = sessions_on(own_database)
            assert await harness.inbox.aprocess_due() == 2
            assert sessions_on(own_database) == before  # the async worker's pool, released
            assert orders(harness) == [("pi_4", "cus_1")]

    asyncio.run(in_one_loop())
    assert sessions_on(own_database) == 0


# -- check_exactly_once's injected death, on the async worker ------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def server(request: pytest.FixtureRequest) -> Iterator[str | None]:
    yield None if request.param == "sqlite" else postgres()


def test_the_checks_injected_death_rolls_the_async_transaction_back(
    shop: AsyncShop, server: str | None
) -> None:
    """The death comes after the handler's session committed its savepoint and its outbox
    message was written, before the claim's commit: all of it is rolled back, and the retry
    applies the event once."""
    from hookinbox.testing._check import Schedule, _CheckedHarness

    event = checkout("pi_5")
    schedule = Schedule(order=(0,), batches=(1,), process_after=(True,),
                        crashes=frozenset({0}), workers=1)  # fmt: skip
    ids = {f"stripe\0{event['id']}": 0}
    with _CheckedHarness(shop.inbox, schedule, ids, database_url=server) as harness:
        assert harness.inbox.is_async
        harness.deliver("stripe", event)
        harness.process()
        died = harness.event("stripe", event["id"])
        assert died is not None and (died.status, died.attempts) == (Status.PENDING, 1)
        assert (died.last_error or "").startswith("InjectedCrash")
        assert orders(harness) == [] and shop.receipts == []
        harness.clock.advance(3600)
        harness.process()
        assert orders(harness) == [("pi_5", "cus_1")]
        assert shop.receipts == ["receipt:pi_5"]
        done = harness.event("stripe", event["id"])
        assert done is not None and (done.status, done.attempts) == (Status.PROCESSED, 2)
