"""Reconcile against a provider API that misbehaves (issue 45), through the operation and the
worker, on SQLite (what is stored is decided by the insert, which tests/operations/
test_reconcile.py runs on each database): what earlier pages stored stays stored when a
listing is stopped; what the API lists that was not asked for (outside the window, another
account's, not an event, an id that is no id) is skipped and counted, never stored or sent;
and in the worker, a source whose API hangs does not hold up the others."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from hookinbox import Event, HandlerContext, Inbox, WorkerOptions
from hookinbox._operations._reconcile import Reconciled, reconcile
from hookinbox.sources import GitHub, Square, Stripe
from hookinbox.sources._provider_api import ProviderAPIError
from hookinbox.testing import FakeGitHubAPI, FakeSquareAPI, FakeStripeAPI
from tests.support.listed import (
    GITHUB_TOKEN,
    SQUARE_TOKEN,
    STRIPE_KEY,
    hook_delivery,
    square_listed,
    stripe_listed,
)
from tests.support.loopback import Answer, Request, serving

pytestmark = pytest.mark.slow  # a loopback server per test

YEAR = 365 * 86400


@pytest.fixture
def inbox(tmp_path: Path) -> Iterator[Inbox]:
    inbox = Inbox(f"sqlite:///{tmp_path / 'inbox.db'}")
    yield inbox
    inbox.close()


def take_all(inbox: Inbox, *sources: Stripe | Square | GitHub) -> None:
    for source in sources:
        inbox.add_source(source)

        @inbox.handler(source.name)
        def on_any(event: Event, ctx: HandlerContext) -> None:
            pass

    inbox.migrate()


def run(inbox: Inbox, name: str, since: timedelta = timedelta(days=1)) -> Reconciled:
    source = inbox.sources[name]
    return reconcile(inbox.store.ingest, source, source.listing(), since=since,
                     now=datetime.now(UTC),
                     takes=lambda event_type: inbox._takes(name, event_type))  # fmt: skip


def stored_ids(inbox: Inbox) -> set[str]:
    return {event.id for event in inbox.store.operator.all_events()}


def test_what_earlier_pages_stored_stays_stored_when_the_cursor_sticks(inbox: Inbox) -> None:
    now = int(time.time())
    api = FakeStripeAPI([stripe_listed(n, now - 300 + n) for n in range(150)], stuck=True)
    with serving(api) as server:
        take_all(inbox, Stripe(secret="whsec_x", api_key=STRIPE_KEY, api_base=server.url))
        with pytest.raises(ProviderAPIError, match=r"did not move.*after 2 pages.*\(100 stored\)"):
            run(inbox, "stripe")
    assert stored_ids(inbox) == {e["id"] for e in api.events[50:]}  # the first page, newest


def test_stripe_events_not_asked_for_are_skipped_and_counted(inbox: Inbox) -> None:
    """A listing of the last day that also lists events 10 years ahead and from 1970, another
    Connect account's event, a charge (no event), and objects that name no id or no time."""
    now = int(time.time())
    asked = [stripe_listed(n, now - 600 + n) for n in range(5)]
    planted = [
        stripe_listed(100, now + 10 * YEAR),
        stripe_listed(101, 86400),
        {**stripe_listed(102, now - 60), "account": "acct_1OtherAccount0000"},
        {**stripe_listed(103, now - 60), "object": "charge", "id": "ch_103"},
        {key: value for key, value in stripe_listed(104, now - 60).items() if key != "id"},
        {key: value for key, value in stripe_listed(105, now - 60).items() if key != "created"},
    ]
    api = FakeStripeAPI([*asked, *planted], unfiltered=True)
    with serving(api) as server:
        take_all(inbox, Stripe(secret="whsec_x", api_key=STRIPE_KEY, api_base=server.url))
        result = run(inbox, "stripe")
    assert result.counts() == {
        "listed": 11, "already_stored": 0, "missing": 5, "stored": 5, "skipped_types": 0,
        "redelivery_requested": 0, "skipped_outside_window": 2, "skipped_other_accounts": 1,
        "skipped_not_events": 3, "skipped_bad_ids": 0,
    }  # fmt: skip
    assert stored_ids(inbox) == {e["id"] for e in asked}


def test_an_event_of_the_connect_account_listed_is_not_another_account(inbox: Inbox) -> None:
    now = int(time.time())
    own = {**stripe_listed(1, now - 60), "account": None}  # the platform's own: null
    api = FakeStripeAPI([own])
    with serving(api) as server:
        take_all(inbox, Stripe(secret="whsec_x", api_key=STRIPE_KEY, api_base=server.url))
        assert run(inbox, "stripe").stored == 1


def test_square_events_not_asked_for_are_skipped_and_counted(inbox: Inbox) -> None:
    now = datetime.now(UTC)
    asked = [square_listed(n, now - timedelta(minutes=n + 1)) for n in range(4)]
    planted: list[dict[str, Any]] = [
        square_listed(100, now + timedelta(days=3650)),
        square_listed(101, datetime(1970, 1, 2, tzinfo=UTC)),
        {k: v for k, v in square_listed(102, now).items() if k != "event_id"},
        {k: v for k, v in square_listed(103, now).items() if k != "created_at"},
    ]
    api = FakeSquareAPI([*asked, *planted], unfiltered=True)
    with serving(api) as server:
        take_all(inbox, Square(secret="k", notification_url="https://shop.example.com/sq",
                               access_token=SQUARE_TOKEN, api_base=server.url))  # fmt: skip
        result = run(inbox, "square")
    assert (result.listed, result.stored, result.skipped_outside_window,
            result.skipped_not_events) == (8, 4, 2, 2)  # fmt: skip
    assert stored_ids(inbox) == {e["event_id"] for e in asked}


def test_github_deliveries_not_asked_for_are_skipped_counted_and_never_sent(
    inbox: Inbox,
) -> None:
    now = datetime.now(UTC)
    failed = [hook_delivery(n, now - timedelta(minutes=10 - n), status_code=500) for n in range(3)]
    api = FakeGitHubAPI(deliveries=failed)
    api.planted = [
        {**hook_delivery(100, now, status_code=500), "id": "1/../../../../../user/keys"},
        {**hook_delivery(101, now, status_code=500), "id": "10000101"},
        hook_delivery(102, now + timedelta(days=3650), status_code=500),
        {k: v for k, v in hook_delivery(103, now, status_code=500).items() if k != "guid"},
    ]
    with serving(api) as server:
        api.url = server.url
        take_all(inbox, GitHub(secret="s", api_token=GITHUB_TOKEN, hook="octo-org/shop/12345678",
                               api_base=server.url))  # fmt: skip
        result = run(inbox, "github")
    assert (result.listed, result.redelivery_requested, result.skipped_bad_ids) == (7, 3, 2)
    assert (result.skipped_outside_window, result.skipped_not_events) == (1, 1)
    assert sorted(api.redelivered) == [d["id"] for d in failed]
    posts = sorted(r.path for r in server.requests if r.method == "POST")
    hook = "/repos/octo-org/shop/hooks/12345678"
    assert posts == [f"{hook}/deliveries/{d['id']}/attempts" for d in failed]  # nothing else


def test_a_source_whose_api_hangs_does_not_hold_up_the_others(inbox: Inbox) -> None:
    """Two sources reconciled by one worker, the hanging one first: the other is reconciled
    at once, on its own clock, while the first still waits for its page."""
    release = threading.Event()

    def hanging(request: Request) -> Answer:
        release.wait(60)
        return 200, {"Content-Type": "application/json"}, b'{"data": [], "has_more": false}'

    now = int(time.time())
    healthy = FakeStripeAPI([stripe_listed(n, now - 600 + n) for n in range(30)])
    with serving(hanging) as stuck, serving(healthy) as server:
        take_all(inbox, Stripe(secret="whsec_a", api_key=STRIPE_KEY, api_base=stuck.url,
                               name="stripe-hanging"),
                 Stripe(secret="whsec_b", api_key=STRIPE_KEY, api_base=server.url))  # fmt: skip
        worker = inbox.worker(WorkerOptions(handle_signals=False, poll_interval=0.05),
                              reconcile_every=timedelta(hours=1))  # fmt: skip
        thread = threading.Thread(target=worker.run)
        thread.start()
        try:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                if len(stored_ids(inbox)) == 30 and stuck.requests:
                    break
                time.sleep(0.05)
            # Both ran at once: one stored its 30 events while the other's first page is
            # still unanswered (`release` is set only below).
            assert len(stored_ids(inbox)) == 30 and len(stuck.requests) == 1
        finally:
            worker.stop()
            thread.join(30)
            release.set()
        assert not thread.is_alive()  # the hanging run was given up with the worker
