"""The worker through a database outage (issue 25): a failover, seen from one worker.

The database is reached through a TCP proxy the test cuts (every connection dropped, new ones
refused, for a bounded time), the way a failover looks from an application host: the old
primary's connections end, and nothing answers until the new one does.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from hookinbox import Event, HandlerContext, Inbox, Message, RetryPolicy, Status, WorkerOptions
from hookinbox._errors import StoreUnavailable
from hookinbox._processing._unrecorded import Unrecorded
from hookinbox._storage import Listener, Store
from hookinbox._storage._schema import outbox
from hookinbox.sources import Stripe
from tests.conftest import _admin_engine, _postgres_database, async_twin
from tests.processing.conftest import checkout
from tests.storage.test_postgres_ha import wait_listening
from tests.support.in_process import build_worker
from tests.support.signing import stripe_delivery
from tests.support.silent_link import SilentLink, silent_link
from tests.support.silent_link import available as silent_link_unavailable
from tests.support.tcp_proxy import Proxy, proxy_to

SECRET = "whsec_test_failover"
LEASE = 600.0
"""Far longer than any test here waits: an attempt retried in time was not waited out."""
WAIT = 60.0

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg_url(request: pytest.FixtureRequest) -> Iterator[str]:
    yield from _postgres_database(request.getfixturevalue("postgres_template"))


@pytest.fixture
def proxy(pg_url: str) -> Iterator[Proxy]:
    parsed = make_url(pg_url)
    with proxy_to(parsed.host or "127.0.0.1", parsed.port or 5432) as proxy:
        yield proxy


def through(url: str, proxy: Proxy, driver: str = "sync") -> str:
    """`url` through the proxy; with the async driver (the async worker) for `driver="async"`."""
    moved = make_url(url).set(host="127.0.0.1", port=proxy.port).render_as_string(False)
    return async_twin(moved) if driver == "async" else moved


def run_worker(inbox: Inbox) -> tuple[Any, threading.Thread]:
    options = WorkerOptions(concurrency=2, lease_seconds=LEASE, handle_signals=False)
    worker = build_worker(inbox, options)
    run = (lambda: asyncio.run(worker.run())) if inbox.is_async else worker.run
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return worker, thread


def wait_status(inbox: Inbox, event_id: str, status: Status) -> Event:
    deadline = time.monotonic() + WAIT
    event = None
    while time.monotonic() < deadline:
        try:
            event = inbox.store.get_event("stripe", event_id)
        except Exception:  # the outage may not be over yet for this read
            event = None
        if event is not None and event.status is status:
            return event
        time.sleep(0.1)
    raise AssertionError(f"{event_id} is {event and event.status}, not {status}, after {WAIT} s")


def test_an_attempt_that_could_not_be_recorded_is_retried_without_waiting_out_the_lease(
    pg_url: str, proxy: Proxy, driver: str
) -> None:
    """The first attempt fails just as the database goes away for a second: its failure
    cannot be written. Once the database is back, the worker writes it (the event is retried
    and processed) long before the 600 s lease would have run out."""
    calls: list[str] = []
    inbox = Inbox(
        through(pg_url, proxy, driver), retry=RetryPolicy(first_delay=0.1, max_attempts=5)
    )
    inbox.add_source(Stripe(secret=SECRET))

    @inbox.handler("stripe", "checkout.session.completed")
    def on_checkout(event: Event, ctx: HandlerContext) -> None:
        calls.append(event.id)
        if len(calls) == 1:
            proxy.cut(1.0)
            raise RuntimeError("the shop's API failed, and then the database went away")

    headers, body = stripe_delivery(checkout(1), SECRET)
    assert inbox.receive("stripe", headers, body).body["status"] == "accepted"
    worker, thread = run_worker(inbox)
    try:
        event = wait_status(inbox, "evt_1", Status.PROCESSED)
    finally:
        worker.stop()
        thread.join(timeout=10)
        inbox.close()
    assert calls == ["evt_1", "evt_1"]
    assert event.attempts == 2


def test_a_delivery_that_could_not_be_recorded_is_recorded_once_the_database_is_back(
    pg_url: str, proxy: Proxy, driver: str
) -> None:
    """The relay delivers a message just as the database goes away: the delivery cannot be
    written. Written once the database is back, it is not sent a second time (which waiting
    out the lease would have done)."""
    sent: list[str] = []
    inbox = Inbox(through(pg_url, proxy, driver))
    inbox.add_source(Stripe(secret=SECRET))

    @inbox.destination("shipping")
    def ship(message: Message) -> None:
        sent.append(message.key)
        proxy.cut(1.0)

    @inbox.handler("stripe", "checkout.session.completed")
    def on_checkout(event: Event, ctx: HandlerContext) -> None:
        ctx.outbox.send("shipping", {"order": event.id})

    headers, body = stripe_delivery(checkout(1), SECRET)
    assert inbox.receive("stripe", headers, body).body["status"] == "accepted"
    worker, thread = run_worker(inbox)
    try:
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline and message_status(inbox) != "delivered":
            time.sleep(0.1)
    finally:
        worker.stop()
        thread.join(timeout=10)
        inbox.close()
    assert message_status(pg_url) == "delivered"
    assert len(sent) == 1


def message_status(where: Inbox | str) -> str | None:
    store = where.store if isinstance(where, Inbox) else Store(where, auto_migrate=False)
    try:
        with store.engine.connect() as connection:
            return connection.execute(sa.select(outbox.c.status)).scalar()
    except sa.exc.DBAPIError:  # the outage may not be over yet for this read
        return None
    finally:
        if not isinstance(where, Inbox):
            store.dispose()


# -- a server that goes silent (no reset) -----------------------------------------------------

SILENCE_WAIT = 60.0
"""Far above the default tcp_timeout (10 s), far below the kernel's retransmission timeout
(about 15 minutes) that a connection without TCP timeouts waits for."""


@pytest.fixture
def link(pg_url: str) -> Iterator[SilentLink]:
    reason = silent_link_unavailable()
    if reason:
        pytest.skip(reason)
    parsed = make_url(pg_url)
    with silent_link((parsed.host or "127.0.0.1", parsed.port or 5432)) as link:
        yield link


def across(url: str, link: SilentLink) -> str:
    return make_url(url).set(host=link.address, port=link.port).render_as_string(False)


def in_thread(call: Callable[[], object]) -> tuple[threading.Thread, list[BaseException]]:
    """Run `call` in a daemon thread (it may hang); collects what it raised."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as error:  # the test inspects it
            raised.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, raised


def test_a_pooled_connection_to_a_silent_server_fails_instead_of_hanging(
    pg_url: str, link: SilentLink
) -> None:
    """Default options: the pooled connection's check fails within the TCP timeout and the
    store answers "unavailable"; once the server answers again, the dead connection is gone
    from the pool and the store works."""
    store = Store(across(pg_url, link))
    store.ping()  # one connection in the pool, idle
    link.silence()
    thread, raised = in_thread(store.ping)
    thread.join(SILENCE_WAIT)
    assert not thread.is_alive(), f"ping still blocked after {SILENCE_WAIT} s of silence"
    assert raised and isinstance(raised[0], StoreUnavailable), raised
    link.restore()
    store.ping()
    store.dispose()


def test_an_asyncpg_connection_to_a_silent_server_fails_instead_of_hanging(
    pg_url: str, link: SilentLink
) -> None:
    """asyncpg has no TCP timeouts of its own: hookinbox sets libpq's on its socket, so the
    async worker's statement on a silent server fails within the TCP timeout too (503-like
    `StoreUnavailable`), and a new connection works once the server answers."""
    from hookinbox._storage import AsyncStore

    url = async_twin(across(pg_url, link))
    sync = Store(across(pg_url, link))
    astore = AsyncStore(sync, make_url(url))
    probe = sa.text("SELECT 1")

    async def select_one() -> None:
        async with astore.transaction() as connection:
            await connection.execute(probe)

    async def scenario() -> None:
        await select_one()  # one connection in the pool, idle
        link.silence()
        began = time.monotonic()
        with pytest.raises(StoreUnavailable):
            await asyncio.wait_for(select_one(), SILENCE_WAIT)
        assert time.monotonic() - began < SILENCE_WAIT
        link.restore()
        await select_one()
        await astore.dispose()

    asyncio.run(scenario())
    sync.dispose()


def test_the_listener_gives_up_a_silent_server_and_listens_again(
    pg_url: str, link: SilentLink, caplog: pytest.LogCaptureFixture
) -> None:
    store, stop = Store(across(pg_url, link)), threading.Event()
    database = make_url(pg_url).database or ""
    admin = _admin_engine()
    listener = Listener(store, {Listener.EVENTS: threading.Event()}, stop)
    caplog.set_level(logging.WARNING, "hookinbox.worker")
    listener.start()
    try:
        pid = wait_listening(admin, database, None)
        link.silence()
        deadline = time.monotonic() + SILENCE_WAIT
        while time.monotonic() < deadline and not lost(caplog):
            time.sleep(0.1)
        assert lost(caplog), f"the listener did not notice {SILENCE_WAIT} s of silence"
        link.restore()
        wait_listening(admin, database, pid, timeout=SILENCE_WAIT)
    finally:
        stop.set()
        listener.join(timeout=5)
        admin.dispose()
        store.dispose()


def lost(caplog: pytest.LogCaptureFixture) -> bool:
    return any("LISTEN connection lost" in r.getMessage() for r in caplog.records)


def test_owed_writes_wait_for_the_database_in_order_and_lapse_with_their_lease() -> None:
    written: list[str] = []
    database_up = False

    def write(name: str) -> Callable[[], object]:
        def run() -> None:
            if not database_up:
                raise StoreUnavailable("database unavailable: down")
            written.append(name)

        return run

    now = datetime.now(UTC)
    owed = Unrecorded()
    owed.keep(write("a"), now + timedelta(seconds=60), "a")
    owed.keep(write("lapsed"), now + timedelta(seconds=1), "lapsed")
    owed.keep(write("b"), now + timedelta(seconds=60), "b")
    owed.retry(now)
    assert (written, len(owed)) == ([], 3)  # still down: everything is kept
    database_up = True
    owed.retry(now + timedelta(seconds=2))  # the second one's lease ran out meanwhile
    assert (written, len(owed)) == (["a", "b"], 0)
