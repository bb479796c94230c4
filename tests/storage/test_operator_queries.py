"""The queries the dashboard added: keyset pages, time and id filters, an event's outbox
messages, and the duplicate ratio per hour."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

from hookinbox._model import NewDelivery
from hookinbox._storage import (
    EventFilter,
    Store,
    duplicate_series,
    enqueue,
    list_events,
    messages_for_event,
)

NOON = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def receive(store: Store, event_id: str, at: datetime, source: str = "stripe") -> None:
    body = f'{{"id": "{event_id}"}}'.encode()
    store.record_delivery(
        NewDelivery(
            source=source,
            event_id=event_id,
            event_type="invoice.paid",
            occurred_at=None,
            received_at=at,
            body=body,
            headers={},
            body_sha256=hashlib.sha256(body).hexdigest(),
        )
    )


def ids(rows: list[dict[str, object]]) -> list[object]:
    return [row["event_id"] for row in rows]


def test_keyset_pages_cover_every_event_once_even_with_equal_times(store: Store) -> None:
    for number in range(7):  # three share one instant: the row id breaks the tie
        receive(store, f"evt_{number}", NOON + timedelta(seconds=min(number, 3)))

    pages: list[list[object]] = []
    before = None
    while True:
        rows = list_events(store, EventFilter(), 3, before=before)
        if not rows:
            break
        pages.append(ids(rows))
        before = (rows[-1]["received_at"], rows[-1]["id"])

    assert pages == [["evt_6", "evt_5", "evt_4"], ["evt_3", "evt_2", "evt_1"], ["evt_0"]]


def test_until_and_event_id_filters(store: Store) -> None:
    receive(store, "evt_a", NOON)
    receive(store, "evt_b", NOON + timedelta(hours=1))
    receive(store, "evt_a", NOON, source="github")

    assert ids(list_events(store, EventFilter(until=NOON + timedelta(hours=1)), 10)) == [
        "evt_a", "evt_a"
    ]  # fmt: skip
    found = list_events(store, EventFilter(event_id="evt_a", source="github"), 10)
    assert [(row["source"], row["event_id"]) for row in found] == [("github", "evt_a")]


def test_messages_for_event_lists_only_that_events_messages(store: Store) -> None:
    with store.transaction() as connection:
        for key, event_id in (("m1", "evt_1"), ("m2", "evt_2"), ("m3", "evt_1")):
            enqueue(
                connection, destination="crm", key=key, payload={"k": key}, ordering_key=None,
                source="stripe", event_id=event_id, now=NOON,
            )  # fmt: skip

    messages = messages_for_event(store, "stripe", "evt_1")

    assert [(m["message_key"], m["status"], m["attempts"]) for m in messages] == [
        ("m1", "pending", 0),
        ("m3", "pending", 0),
    ]
    assert messages_for_event(store, "github", "evt_1") == []


def test_duplicate_series_counts_each_hour_apart(store: Store) -> None:
    now = NOON
    receive(store, "evt_1", now - timedelta(minutes=90))
    receive(store, "evt_1", now - timedelta(minutes=80))  # a duplicate, same hour
    receive(store, "evt_2", now - timedelta(minutes=10))
    receive(store, "evt_3", now - timedelta(hours=30))  # outside the day

    with store.reading() as connection:
        series = duplicate_series(connection, now)

    assert len(series) == 24
    assert series[0][0] == now - timedelta(hours=24)
    assert [(r.deliveries, r.duplicates) for _, r in series[-2:]] == [(2, 1), (1, 0)]
    assert sum(r.deliveries for _, r in series) == 3
