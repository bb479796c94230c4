"""Reconcile on each database: the events Stripe's API lists that never arrived are stored
once, under a webhook's key, and processed exactly once, whatever webhooks do meanwhile."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from hookinbox import Inbox, Status
from hookinbox._operations._reconcile import Reconciled, reconcile
from hookinbox.sources._provider_api import APIRefused, Budget, Listed, ProviderAPIError
from hookinbox.testing import FakeStripeAPI
from tests.apps import reconciling
from tests.support.listed import stripe_listed
from tests.support.loopback import Loopback, serving
from tests.support.signing import stripe_delivery

pytestmark = pytest.mark.slow  # a loopback server per test

NOTHING_UNASKED = {"skipped_outside_window": 0, "skipped_other_accounts": 0,
                   "skipped_not_events": 0, "skipped_bad_ids": 0}  # fmt: skip


@pytest.fixture
def api() -> FakeStripeAPI:
    now = int(time.time())  # at the test, not at import: the window is relative to now
    return FakeStripeAPI([stripe_listed(n, now - 3600 + n) for n in range(250)])


@pytest.fixture
def server(api: FakeStripeAPI) -> Iterator[Loopback]:
    with serving(api) as loopback:
        yield loopback


@pytest.fixture
def inbox(db_url: str, server: Loopback) -> Iterator[Inbox]:
    inbox = reconciling.build(db_url, api_base=server.url)
    inbox.migrate()
    yield inbox
    inbox.close()


def run(inbox: Inbox, since: timedelta = timedelta(days=3), dry_run: bool = False) -> Reconciled:
    source = inbox.sources["stripe"]
    return reconcile(
        inbox.store.ingest,
        source,
        source.listing(),
        since=since,
        now=datetime.now(UTC),
        takes=lambda event_type: inbox._takes("stripe", event_type),
        dry_run=dry_run,
    )


def applied(inbox: Inbox) -> Counter[str]:
    query = sa.select(reconciling.applied_invoices.c.event_id)
    with inbox.store.reading() as connection:
        return Counter(connection.execute(query).scalars())


def deliver(inbox: Inbox, event: dict[str, object]) -> None:
    headers, body = stripe_delivery(event, reconciling.SECRET)
    assert inbox.receive("stripe", headers, body).ok


def test_missing_events_are_stored_and_processed_exactly_once(
    inbox: Inbox, api: FakeStripeAPI
) -> None:
    for event in api.events[:40]:
        deliver(inbox, event)  # these arrived; the other 210 were lost
    api.events += [stripe_listed(1000 + n, int(time.time()) - 60, "customer.created")
                   for n in range(5)]  # fmt: skip
    first = run(inbox)
    assert first.counts() == {"listed": 255, "already_stored": 40, "missing": 210, "stored": 210,
                              "skipped_types": 5, "redelivery_requested": 0,
                              **NOTHING_UNASKED}  # fmt: skip
    while inbox.process_due():
        pass
    assert applied(inbox) == Counter({e["id"]: 1 for e in api.events[:250]})
    lost = inbox.store.get_event("stripe", api.events[100]["id"])
    assert lost is not None and lost.status is Status.PROCESSED
    assert (lost.received_via, lost.delivery_count, lost.type) == ("reconcile", 0, "invoice.paid")
    assert json.loads(lost.body) == api.events[100]
    assert inbox.store.get_event("stripe", "evt_" + "0" * 20 + "1000") is None  # skipped type
    again = run(inbox)
    assert again.counts() == {"listed": 255, "already_stored": 250, "missing": 0, "stored": 0,
                              "skipped_types": 5, "redelivery_requested": 0,
                              **NOTHING_UNASKED}  # fmt: skip


def test_a_webhook_after_reconcile_is_a_duplicate(inbox: Inbox, api: FakeStripeAPI) -> None:
    assert run(inbox, since=timedelta(seconds=3600 - 200)).stored > 0  # the last few only
    deliver(inbox, api.events[249])
    while inbox.process_due():
        pass
    event = inbox.store.get_event("stripe", api.events[249]["id"])
    assert event is not None
    assert (event.received_via, event.delivery_count, event.key_conflicts) == ("reconcile", 1, 0)
    assert applied(inbox)[api.events[249]["id"]] == 1


def test_since_is_respected(inbox: Inbox, api: FakeStripeAPI) -> None:
    result = run(inbox, since=timedelta(seconds=3600 - 200))
    start = int(result.since.timestamp())
    assert api.queries[0]["created[gte]"] == str(start)
    inside = [e for e in api.events if e["created"] >= start]
    assert 0 < len(inside) <= 50 and result.listed == result.stored == len(inside)
    assert inbox.store.get_event("stripe", api.events[0]["id"]) is None  # before --since


def test_since_past_the_window_is_clamped(inbox: Inbox) -> None:
    result = run(inbox, since=timedelta(days=45))
    assert result.clamped and datetime.now(UTC) - result.since < timedelta(days=30, seconds=5)


def test_dry_run_stores_nothing(inbox: Inbox, api: FakeStripeAPI) -> None:
    deliver(inbox, api.events[0])
    result = run(inbox, dry_run=True)
    assert (result.missing, result.already_stored, result.stored) == (249, 1, 0)
    assert inbox.store.get_event("stripe", api.events[1]["id"]) is None


def test_429_then_success(inbox: Inbox, api: FakeStripeAPI) -> None:
    api.faults.append((429, {"Retry-After": "0"}))
    assert run(inbox).stored == 250


def test_pages_stored_before_a_failure_stay_stored(inbox: Inbox, api: FakeStripeAPI) -> None:
    source = inbox.sources["stripe"]
    listing = source.listing()
    listing._sleep = lambda _seconds: None  # type: ignore[attr-defined]  # no back-off waits
    pages = listing.pages
    served: list[int] = []

    def failing_after_the_first(since: datetime, budget: Budget) -> Iterator[list[Listed]]:
        for page in pages(since, budget):
            served.append(len(page))
            yield page
            api.faults += [(500, {})] * 5  # the next page never comes

    listing.pages = failing_after_the_first  # type: ignore[method-assign]
    with pytest.raises(ProviderAPIError, match=r"answered 500, 5 tries; stopped after 1 page: "
                       r"what they stored stays stored \(100 stored\)"):  # fmt: skip
        reconcile(inbox.store.ingest, source, listing, since=timedelta(days=3),
                  now=datetime.now(UTC), takes=lambda t: True)  # fmt: skip
    assert served == [100] and len(inbox.store.operator.all_events()) == 100


def test_a_refused_key_stores_nothing(inbox: Inbox, api: FakeStripeAPI) -> None:
    api.api_key = "sk_test_another"
    with pytest.raises(APIRefused):
        run(inbox)
    assert inbox.store.operator.all_events() == []


def test_webhooks_during_a_reconcile_are_each_processed_once(
    inbox: Inbox, api: FakeStripeAPI
) -> None:
    """Webhooks of the same 250 events arrive from four threads while reconcile inserts them
    and a worker processes what is stored: each event is stored once, applied once."""
    stop = threading.Event()
    errors: list[BaseException] = []

    def webhooks(offset: int) -> None:
        try:
            for event in api.events[offset::4]:
                deliver(inbox, event)
        except BaseException as error:  # surfaced below
            errors.append(error)

    def worker() -> None:
        while not stop.is_set():
            if not inbox.process_due():
                time.sleep(0.01)

    threads = [threading.Thread(target=webhooks, args=(n,)) for n in range(4)]
    processing = threading.Thread(target=worker)
    for thread in [*threads, processing]:
        thread.start()
    result = run(inbox)
    for thread in threads:
        thread.join()
    stop.set()
    processing.join()
    while inbox.process_due():
        pass
    assert errors == []
    assert result.listed == 250 and result.already_stored + result.stored == 250
    assert applied(inbox) == Counter({e["id"]: 1 for e in api.events})
    stored = inbox.store.operator.all_events()
    assert len(stored) == 250 and all(e.status is Status.PROCESSED for e in stored)
    assert all(e.key_conflicts == 0 for e in stored)
    assert sum(e.delivery_count for e in stored) == 250  # every webhook counted, none lost
