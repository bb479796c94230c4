"""Group commit over HTTP: concurrent deliveries, a batch that fails, and group commit off."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest
import sqlalchemy as sa

from hookinbox import Inbox
from hookinbox._storage._schema import events
from tests.apps.basic import STRIPE_SECRET, build
from tests.storage.test_group_commit import broken_batch, watched
from tests.support.signing import stripe_delivery, stripe_event


@pytest.fixture
def inbox(db_url: str) -> Iterator[Inbox]:
    inbox = build(db_url)
    yield inbox
    inbox.close()


def post_all(inbox: Inbox, deliveries: list[tuple[dict[str, str], bytes]]) -> list[httpx.Response]:
    """Send every delivery at once (one task each) to the inbox's ASGI app."""

    async def send() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=inbox.asgi())
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return await asyncio.gather(
                *(client.post("/webhooks/stripe", headers=h, content=b) for h, b in deliveries)
            )

    return asyncio.run(send())


def stored_ids(inbox: Inbox) -> set[str]:
    with inbox.store.engine.connect() as connection:
        return set(connection.execute(sa.select(events.c.event_id)).scalars())


def test_concurrent_deliveries_and_duplicates_are_answered_each(inbox: Inbox) -> None:
    inbox.store.ensure_schema()
    ids = [f"evt_{n % 40}" for n in range(120)]  # three copies of each, all at once
    with watched(inbox.store) as seen:
        answers = post_all(inbox, [stripe_delivery(stripe_event(i), STRIPE_SECRET) for i in ids])
    assert all(a.status_code == 200 for a in answers)
    statuses = [a.json()["status"] for a in answers]
    assert statuses.count("accepted") == 40 and statuses.count("duplicate") == 80
    for key in set(ids):
        mine = [s for i, s in zip(ids, statuses, strict=True) if i == key]
        assert sorted(mine) == ["accepted", "duplicate", "duplicate"]
    assert max(seen["batches"]) > 1, "deliveries that arrived together never shared a batch"
    assert stored_ids(inbox) == set(ids)


def test_a_failed_batch_answers_503_to_each_of_its_deliveries(inbox: Inbox) -> None:
    """The batch's connection is killed after its insert, before the commit: every delivery
    in it is answered 503 (none 200), nothing of it stays, and the provider's retries are then
    accepted exactly once."""
    inbox.store.ensure_schema()
    ids = [f"evt_{n}" for n in range(60)]
    with broken_batch(inbox.store, lambda size: size > 1) as killed:
        answers = post_all(inbox, [stripe_delivery(stripe_event(i), STRIPE_SECRET) for i in ids])
    refused = [i for i, a in zip(ids, answers, strict=True) if a.status_code == 503]
    assert killed and len(refused) == killed[0]
    assert all(a.status_code in (200, 503) for a in answers)
    assert all(a.headers["retry-after"] for a in answers if a.status_code == 503)
    assert stored_ids(inbox) == set(ids) - set(refused)
    retries = post_all(inbox, [stripe_delivery(stripe_event(i), STRIPE_SECRET) for i in refused])
    assert [r.json()["status"] for r in retries] == ["accepted"] * len(refused)
    assert stored_ids(inbox) == set(ids)


def test_with_group_commit_off_each_delivery_commits_alone(db_url: str) -> None:
    inbox = build(db_url, group_commit=False)
    inbox.store.ensure_schema()
    ids = [f"evt_{n % 10}" for n in range(30)]
    with watched(inbox.store) as seen:
        answers = post_all(inbox, [stripe_delivery(stripe_event(i), STRIPE_SECRET) for i in ids])
    inbox.close()
    statuses = [a.json()["status"] for a in answers]
    assert statuses.count("accepted") == 10 and statuses.count("duplicate") == 20
    assert seen["batches"] == [] and len(seen["commits"]) == 30
