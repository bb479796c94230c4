"""The worker through a database outage (issue 25): a failover, seen from one worker.

The database is reached through a TCP proxy the test cuts (every connection dropped, new ones
refused, for a bounded time), the way a failover looks from an application host: the old
primary's connections end, and nothing answers until the new one does.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from hookinbox import Event, HandlerContext, Inbox, Message, RetryPolicy, Status, WorkerOptions
from hookinbox._storage import Store, outbox
from hookinbox.sources import Stripe
from tests.conftest import _postgres_database
from tests.processing.conftest import checkout
from tests.support.signing import stripe_delivery
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


def through(url: str, proxy: Proxy) -> str:
    return make_url(url).set(host="127.0.0.1", port=proxy.port).render_as_string(False)


def run_worker(inbox: Inbox) -> tuple[Any, threading.Thread]:
    options = WorkerOptions(concurrency=2, lease_seconds=LEASE, handle_signals=False)
    worker = inbox.worker(options)
    thread = threading.Thread(target=worker.run, daemon=True)
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
    pg_url: str, proxy: Proxy
) -> None:
    """The first attempt fails just as the database goes away for a second: its failure
    cannot be written. Once the database is back, the worker writes it (the event is retried
    and processed) long before the 600 s lease would have run out."""
    calls: list[str] = []
    inbox = Inbox(through(pg_url, proxy), retry=RetryPolicy(first_delay=0.1, max_attempts=5))
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
    pg_url: str, proxy: Proxy
) -> None:
    """The relay delivers a message just as the database goes away: the delivery cannot be
    written. Written once the database is back, it is not sent a second time (which waiting
    out the lease would have done)."""
    sent: list[str] = []
    inbox = Inbox(through(pg_url, proxy))
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
