"""The queries the dashboard added: keyset pages, time and id filters, the erased mark, an
event's outbox messages, and the duplicate ratio per hour."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from hookinbox._model import NewDelivery, Status
from hookinbox._records import Actor, Bucket, EventFilter, search_for
from hookinbox._storage import Store
from hookinbox._storage._schema import event_queue, events

NOON = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def receive(store: Store, event_id: str, at: datetime, source: str = "stripe") -> None:
    body = f'{{"id": "{event_id}"}}'.encode()
    store.ingest.record(
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
        rows = store.operator.list_events(EventFilter(), 3, before=before)
        if not rows:
            break
        pages.append(ids(rows))
        before = (rows[-1]["received_at"], rows[-1]["id"])

    assert pages == [["evt_6", "evt_5", "evt_4"], ["evt_3", "evt_2", "evt_1"], ["evt_0"]]


def test_the_erased_mark_follows_the_payload_rows_in_the_pages_order(store: Store) -> None:
    for number in range(6):
        receive(store, f"evt_{number}", NOON + timedelta(seconds=number // 2))
    gone = store.erasure.erase(
        [store.get_event("stripe", e).row_id for e in ("evt_1", "evt_4")],  # type: ignore[union-attr]
        NOON, Actor("test"),
    )  # fmt: skip
    assert len(gone) == 2

    def marked(filters: EventFilter, **kwargs: object) -> list[tuple[object, object]]:
        rows = store.operator.list_events(filters, 4, mark_erased=True, **kwargs)  # type: ignore[arg-type]
        return [(row["event_id"], row["payload_erased"]) for row in rows]

    first = marked(EventFilter())
    assert first == [("evt_5", False), ("evt_4", True), ("evt_3", False), ("evt_2", False)]
    cursor = store.operator.list_events(EventFilter(), 4)[-1]
    older = marked(EventFilter(), before=(cursor["received_at"], cursor["id"]))
    assert older == [("evt_1", True), ("evt_0", False)]
    # Open events are read from the queue's table: the mark is the same.
    assert marked(EventFilter(status=Status.PENDING))[:2] == [("evt_5", False), ("evt_4", True)]
    # A payload search finds only kept payloads.
    found = marked(EventFilter(), payload=search_for("id", "evt_3"))
    assert found == [("evt_3", False)]
    assert marked(EventFilter(), payload=search_for("id", "evt_4")) == []
    assert "payload_erased" not in store.operator.list_events(EventFilter(), 1)[0]


def test_until_and_event_id_filters(store: Store) -> None:
    receive(store, "evt_a", NOON)
    receive(store, "evt_b", NOON + timedelta(hours=1))
    receive(store, "evt_a", NOON, source="github")

    assert ids(store.operator.list_events(EventFilter(until=NOON + timedelta(hours=1)), 10)) == [
        "evt_a", "evt_a"
    ]  # fmt: skip
    found = store.operator.list_events(EventFilter(event_id="evt_a", source="github"), 10)
    assert [(row["source"], row["event_id"]) for row in found] == [("github", "evt_a")]


def test_messages_for_event_lists_only_that_events_messages(store: Store) -> None:
    with store.transaction() as connection:
        for key, event_id in (("m1", "evt_1"), ("m2", "evt_2"), ("m3", "evt_1")):
            store.outbox.enqueue(
                connection, destination="crm", key=key, payload={"k": key}, ordering_key=None,
                source="stripe", event_id=event_id, now=NOON,
            )  # fmt: skip

    messages = store.outbox.for_event("stripe", "evt_1")

    assert [(m["message_key"], m["status"], m["attempts"]) for m in messages] == [
        ("m1", "pending", 0),
        ("m3", "pending", 0),
    ]
    assert store.outbox.for_event("github", "evt_1") == []


def test_activity_counts_each_source_per_bucket_in_the_database(store: Store) -> None:
    start = NOON - timedelta(hours=24)
    receive(store, "evt_1", NOON - timedelta(minutes=90))  # bucket 22
    receive(store, "evt_1", NOON - timedelta(minutes=80))  # a duplicate, same hour
    receive(store, "evt_2", NOON - timedelta(minutes=10))  # bucket 23
    receive(store, "evt_2", start, source="github")  # bucket 0: its first instant
    receive(store, "evt_3", NOON - timedelta(hours=30))  # before the window
    receive(store, "evt_4", NOON + timedelta(minutes=1))  # after it
    with store.transaction() as connection:
        failed = sa.select(events.c.id).where(events.c.event_id == "evt_2").scalar_subquery()
        connection.execute(events.update().where(events.c.id.in_(failed)).values(status="failed"))
        connection.execute(
            event_queue.update().where(event_queue.c.id.in_(failed)).values(state="failed")
        )

    with store.reading() as connection:
        found = store.stats.activity(connection, start, timedelta(hours=1), 24)

    assert list(found) == ["github", "stripe"]
    stripe = found["stripe"]
    assert len(stripe) == 24 and sum(b.deliveries for b in stripe) == 3
    assert (stripe[22], stripe[23]) == (Bucket(2, 1, 0), Bucket(1, 0, 1))
    assert stripe[22].duplicate_ratio == 0.5
    assert found["github"][0] == Bucket(1, 0, 1)
