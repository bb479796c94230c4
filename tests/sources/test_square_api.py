"""Square's SearchEvents API: the loopback imitation held to the official `squareup` SDK,
and the listing `hookinbox reconcile` uses (`SquareEvents`), stored once on each database."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from square import Square as SquareClient
from square.core.api_error import ApiError
from tests.support.listed import SQUARE_TOKEN, square_listed
from tests.support.loopback import Loopback, serving

from hookinbox import Event, HandlerContext, Inbox
from hookinbox._operations._reconcile import reconcile
from hookinbox.sources import Square
from hookinbox.sources._provider_api import APIRefused, Budget
from hookinbox.testing import FakeSquareAPI

pytestmark = pytest.mark.slow  # a loopback server per test

NOW = datetime.now(UTC)
URL = "https://shop.example.com/webhooks/square"


@pytest.fixture
def api() -> FakeSquareAPI:
    now = datetime.now(UTC)  # at the test, not at import: the window is relative to now
    return FakeSquareAPI([square_listed(n, now - timedelta(minutes=250 - n)) for n in range(250)])


@pytest.fixture
def server(api: FakeSquareAPI) -> Iterator[Loopback]:
    with serving(api) as loopback:
        yield loopback


def test_the_imitation_searches_as_the_sdk_reads_square(
    api: FakeSquareAPI, server: Loopback
) -> None:
    client = SquareClient(token=SQUARE_TOKEN, base_url=server.url)
    created = datetime.fromisoformat(api.events[150]["created_at"].replace("Z", "+00:00"))
    start = (created - timedelta(seconds=30)).isoformat()
    query = {"filter": {"created_at": {"start_at": start}}, "sort": {"field": "DEFAULT",
                                                                      "order": "DESC"}}  # fmt: skip
    ids: list[str] = []
    cursor = None
    while True:
        answer = client.events.search_events(
            limit=40, query=query, **({"cursor": cursor} if cursor else {})
        )
        ids += [event.event_id for event in answer.events or []]
        cursor = answer.cursor
        if not cursor:
            break
    assert ids == [api.events[n]["event_id"] for n in reversed(range(150, 250))]
    with pytest.raises(ApiError) as refused:
        SquareClient(token="wrong", base_url=server.url).events.search_events(limit=1)
    assert refused.value.status_code == 401


def test_missing_events_are_stored_once(db_url: str, api: FakeSquareAPI, server: Loopback) -> None:
    applied: Counter[str] = Counter()
    inbox = Inbox(db_url)
    source = Square(secret="sq-key", notification_url=URL, access_token=SQUARE_TOKEN,
                    api_base=server.url)  # fmt: skip
    inbox.add_source(source)

    @inbox.handler("square", "payment.updated")
    def on_payment(event: Event, ctx: HandlerContext) -> None:
        applied[event.id] += 1

    def run() -> tuple[int, int, int]:
        result = reconcile(inbox.store.ingest, source, source.listing(), since=timedelta(hours=5),
                           now=datetime.now(UTC),
                           takes=lambda t: inbox._takes("square", t))  # fmt: skip
        return result.listed, result.stored, result.already_stored

    try:
        inbox.migrate()
        assert run() == (250, 250, 0)
        assert run() == (250, 0, 250)
        while inbox.process_due():
            pass
        assert applied == Counter(e["event_id"] for e in api.events)
        stored = inbox.store.get_event("square", api.events[7]["event_id"])
        assert stored is not None and stored.received_via == "reconcile"
        assert stored.type == "payment.updated" and stored.payload == api.events[7]
        assert api.searches[0]["query"]["filter"] == {
            "created_at": {"start_at": api.searches[0]["query"]["filter"]["created_at"]["start_at"]}
        }  # no filter besides the time
    finally:
        inbox.close()


def test_a_refused_token_fails_at_once(server: Loopback) -> None:
    source = Square(secret="k", notification_url=URL, access_token="wrong", api_base=server.url)
    with pytest.raises(APIRefused, match="401"):
        list(source.listing().pages(NOW, Budget()))
