"""Batched deliveries (docs/ingest.md, "Batched deliveries"), on SQLite and PostgreSQL.

One verified delivery carrying several events (HubSpot's array here: a pure source, no extra)
is stored event by event, in one transaction, and answered once; a redelivery stores only the
events not stored yet. Group commit on and off, and inline, since each stores a batch its own
way; and copies of one batch sent at once by real processes store each event once.
"""

from __future__ import annotations

import json
import multiprocessing
import random
import time
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from hookinbox import Inbox
from hookinbox._storage._schema import events, payloads
from hookinbox.sources import HubSpot
from hookinbox.testing import sign
from tests.support.workers import opened_store, read_all

SECRET = "batch-secret"
URL = "https://hooks.example.com/webhooks/hubspot"


def batch(*ids: int, note: str = "") -> list[dict[str, Any]]:
    return [
        {"eventId": i, "subscriptionId": 1, "subscriptionType": "contact.creation", "note": note}
        for i in ids
    ]


def deliver(inbox: Inbox, events_: list[dict[str, Any]]) -> dict[str, Any]:
    headers, body = sign(inbox.sources["hubspot"], events_)
    reply = inbox.receive("hubspot", headers, body)
    assert reply.status_code == 200, reply.body
    return dict(reply.body)


def counts(database_url: str) -> dict[str, int]:
    with opened_store(database_url, migrate=False) as store:
        rows = read_all(store, sa.select(events.c.event_id, events.c.delivery_count))
    return {str(event_id): int(count) for event_id, count in rows}


MODES = ["group-commit", "one-transaction", "inline"]


@pytest.fixture(params=MODES)
def inbox(request: pytest.FixtureRequest, db_url: str) -> Iterator[Inbox]:
    mode = request.param
    inbox = Inbox(db_url, group_commit=None if mode == "group-commit" else False)
    inbox.add_source(HubSpot(secret=SECRET, url=URL), inline=mode == "inline")
    inbox.handler("hubspot")(record_handled)
    HANDLED.clear()
    yield inbox
    inbox.close()


HANDLED: list[str] = []
FAIL_ON: set[str] = set()


def record_handled(event: Any, ctx: Any) -> None:
    if event.id in FAIL_ON:
        raise RuntimeError("a handler failing on purpose")
    HANDLED.append(event.id)


def test_a_batch_is_stored_once_and_a_redelivery_stores_only_the_rest(
    inbox: Inbox, db_url: str
) -> None:
    assert deliver(inbox, batch(1, 2)) == {
        "status": "accepted", "events": 2, "accepted": 2, "duplicates": 0,
    }  # fmt: skip
    assert deliver(inbox, batch(1, 2))["status"] == "duplicate"
    # The batch again with one more event: only that one is new.
    assert deliver(inbox, batch(2, 3, 1)) == {
        "status": "accepted", "events": 3, "accepted": 1, "duplicates": 2,
    }  # fmt: skip
    assert counts(db_url) == {"1:1": 3, "1:2": 3, "1:3": 1}
    if "hubspot" in inbox._registry.inline_sources:
        assert sorted(HANDLED) == ["1:1", "1:2", "1:3"]  # each handled once, in the request


def test_inline_a_failing_handler_keeps_none_of_the_batch(tmp_path: Any) -> None:
    inbox = Inbox(f"sqlite:///{tmp_path / 'inline.db'}")
    inbox.add_source(HubSpot(secret=SECRET, url=URL), inline=True)
    inbox.handler("hubspot")(record_handled)
    HANDLED.clear()
    FAIL_ON.add("1:2")
    try:
        headers, body = sign(inbox.sources["hubspot"], batch(1, 2))
        reply = inbox.receive("hubspot", headers, body)
        assert (reply.status_code, reply.body["error"]) == (503, "not_processed")
        assert counts(f"sqlite:///{tmp_path / 'inline.db'}") == {}  # 1:1 rolled back with it
        FAIL_ON.clear()
        assert deliver(inbox, batch(1, 2))["accepted"] == 2
        assert HANDLED == ["1:1", "1:1", "1:2"]  # the failed try ran 1:1, in a rollback
    finally:
        FAIL_ON.clear()
        inbox.close()


def test_one_key_twice_in_one_batch_is_one_event_and_a_duplicate(inbox: Inbox, db_url: str) -> None:
    same = batch(5, note="first") + batch(5, note="second")  # a key conflict inside the batch
    assert deliver(inbox, same) == {
        "status": "accepted", "events": 2, "accepted": 1, "duplicates": 1,
    }  # fmt: skip
    assert counts(db_url) == {"1:5": 2}
    with opened_store(db_url, migrate=False) as store:
        event = store.get_event("hubspot", "1:5")
    assert event is not None and event.payload["note"] == "first" and event.key_conflicts == 1


# -- copies of one batch from concurrent processes ------------------------------------------

PROCESSES = 3
ROUNDS = 4
PER_ROUND = 20


def _send_copies(database_url: str, start_at: float, seed: int) -> list[int]:
    """One process: every round's batch, its events shuffled (so processes lock the rows in
    different orders if the receiver did not sort them), sent when the clock says."""
    inbox = Inbox(database_url, auto_migrate=False)
    inbox.add_source(HubSpot(secret=SECRET, url=URL))
    shuffle = random.Random(seed).shuffle
    accepted = []
    try:
        time.sleep(max(0.0, start_at - time.time()))
        for round_ in range(ROUNDS):
            ids = list(range(round_ * PER_ROUND, (round_ + 1) * PER_ROUND))
            shuffle(ids)
            accepted.append(deliver(inbox, batch(*ids))["accepted"])
    finally:
        inbox.close()
    return accepted


@pytest.mark.slow  # processes: `make test`, not `make test-fast`
def test_copies_of_a_batch_from_concurrent_processes_store_each_event_once(db_url: str) -> None:
    context = multiprocessing.get_context("spawn")
    start_at = time.time() + 2.0  # after every process has imported hookinbox
    with context.Pool(PROCESSES) as pool:
        results = pool.starmap(_send_copies, [(db_url, start_at, s) for s in range(PROCESSES)])
    stored = counts(db_url)
    assert len(stored) == ROUNDS * PER_ROUND
    assert set(stored.values()) == {PROCESSES}  # every copy counted, none stored twice
    # Each event accepted by exactly one copy: the accepted counts of a round add up.
    for round_ in range(ROUNDS):
        assert sum(result[round_] for result in results) == PER_ROUND, results
    with opened_store(db_url, migrate=False) as store:
        stored_body = sa.select(payloads.c.body).join_from(
            events, payloads, payloads.c.id == events.c.id
        )
        body = read_all(store, stored_body.where(events.c.event_id == "1:0"))
    assert json.loads(body[0][0])["eventId"] == 0
