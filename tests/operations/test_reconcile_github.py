"""Reconcile a GitHub hook on each database: each failed delivery the inbox lacks is
redelivered once, arrives signed and is processed once; nothing unsigned is stored."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hookinbox import Event, HandlerContext, Inbox
from hookinbox._operations._reconcile import Reconciled, reconcile
from hookinbox.sources import GitHub
from hookinbox.testing import FakeGitHubAPI, sign
from tests.support.listed import GITHUB_TOKEN, hook_delivery

pytestmark = pytest.mark.slow  # a loopback server per test

NOTHING_UNASKED = {"skipped_outside_window": 0, "skipped_other_accounts": 0,
                   "skipped_not_events": 0, "skipped_bad_ids": 0}  # fmt: skip

SECRET = "gh-reconcile-secret"
NOW = datetime.now(UTC)


def body(delivery: dict[str, Any]) -> bytes:
    return json.dumps({"ref": "refs/heads/main", "after": str(delivery["id"])}).encode()


class Shop:
    def __init__(self, db_url: str, api: FakeGitHubAPI) -> None:
        self.api = api
        self.applied: Counter[str] = Counter()
        self.inbox = Inbox(db_url)
        self.source = GitHub(secret=SECRET, api_token=GITHUB_TOKEN, hook="octo-org/shop/12345678",
                             api_base=api.url)  # fmt: skip
        self.inbox.add_source(self.source)

        @self.inbox.handler("github", "push")
        def on_push(event: Event, ctx: HandlerContext) -> None:
            self.applied[event.id] += 1

        self.inbox.migrate()

    def deliver(self, delivery: dict[str, Any]) -> None:
        """As GitHub sends it: signed, under its GUID (a redelivery keeps it)."""
        headers, signed = sign(self.source, body(delivery), delivery=delivery["guid"],
                               event=delivery["event"], hook_id="12345678")  # fmt: skip
        assert self.inbox.receive("github", headers, signed).ok

    def run(self, dry_run: bool = False) -> Reconciled:
        return reconcile(
            self.inbox.store.ingest, self.source, self.source.listing(), since=timedelta(days=3),
            now=datetime.now(UTC), takes=lambda t: self.inbox._takes("github", t),
            dry_run=dry_run,
        )  # fmt: skip


@pytest.fixture
def shop(db_url: str) -> Iterator[Shop]:
    # GitHub's delivery ids grow with time: the oldest first here.
    deliveries = [
        hook_delivery(0, NOW - timedelta(days=4), status_code=500),  # past GitHub's window
        hook_delivery(1, NOW - timedelta(hours=3), status_code=500, event="star"),
        *(hook_delivery(n, NOW - timedelta(hours=2, minutes=-n), status_code=502)
          for n in range(2, 7)),
        *(hook_delivery(n, NOW - timedelta(hours=1, minutes=-n)) for n in range(7, 10)),
    ]  # fmt: skip
    api = FakeGitHubAPI(deliveries=deliveries)
    with api:
        shop = Shop(db_url, api)
        # GitHub redelivers at once (the redelivery is then listed beside the failure)
        api.on_redeliver = lambda failed: shop.deliver(api.redeliver_as(failed))
        for delivered in deliveries[7:]:
            shop.deliver(delivered)
        yield shop
        shop.inbox.close()


def test_failed_deliveries_are_redelivered_once_and_processed_once(shop: Shop) -> None:
    dry = shop.run(dry_run=True)
    assert (dry.missing, dry.redelivery_requested, shop.api.redelivered) == (5, 0, [])
    first = shop.run()
    assert first.counts() == {"listed": 9, "already_stored": 3, "missing": 5, "stored": 0,
                              "skipped_types": 1, "redelivery_requested": 5,
                              **NOTHING_UNASKED}  # fmt: skip
    assert sorted(shop.api.redelivered) == [10_000_002 + n for n in range(5)]
    while shop.inbox.process_due():
        pass
    guids = [d["guid"] for d in shop.api.deliveries[2:10]]
    assert shop.applied == Counter(guids)
    for guid in guids:
        event = shop.inbox.store.get_event("github", guid)
        assert event is not None and event.received_via == "webhook"  # it came signed
    second = shop.run()
    assert (second.already_stored, second.missing, second.redelivery_requested) == (8, 0, 0)
    for unstored in shop.api.deliveries[:2]:  # past the window; a type no handler takes
        assert shop.inbox.store.get_event("github", unstored["guid"]) is None
