"""Group commit's statement: many deliveries in one upsert write what one-by-one upserts write."""

from __future__ import annotations

import dataclasses
import hashlib
from datetime import UTC, datetime, timedelta
from itertools import count, pairwise

import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hookinbox._model import NewDelivery, RecordedDelivery, Status
from hookinbox._storage import Store
from hookinbox._storage._schema import deliveries, events, payloads
from hookinbox._text import safe_text

START = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def delivery(source: str, event_id: str, body: bytes, n: int, stale: bool = False) -> NewDelivery:
    return NewDelivery(
        source=source,
        event_id=event_id,
        event_type="payment_intent.succeeded",
        occurred_at=None if n % 3 == 0 else START - timedelta(minutes=n),
        received_at=START + timedelta(milliseconds=n, microseconds=7),
        body=body,
        headers={"stripe-signature": f"t={n},v1=00", "content-type": "application/json"},
        body_sha256=hashlib.sha256(body).hexdigest(),
        stale=stale,
    )


def batch(store: Store, items: list[NewDelivery]) -> list[RecordedDelivery]:
    with store.transaction() as connection:
        return store.ingest.record_batch(connection, items)


def rows(store: Store, source: str) -> tuple[list[dict[str, object]], list[tuple[object, ...]]]:
    """Every stored column, the payload's too (ids left out: they differ by backend history),
    in key order."""
    with_payload = events.outerjoin(payloads, payloads.c.id == events.c.id)
    with store.engine.connect() as connection:
        stored = [
            {k: v for k, v in r.items() if k != "id"}
            for r in connection.execute(
                sa.select(events, payloads.c.body, payloads.c.headers)
                .select_from(with_payload)
                .where(events.c.source == source)
                .order_by(events.c.event_id)
            ).mappings()
        ]
        log = [
            tuple(r)
            for r in connection.execute(
                sa.select(
                    deliveries.c.event_id,
                    deliveries.c.received_at,
                    deliveries.c.duplicate,
                    deliveries.c.key_conflict,
                )
                .where(deliveries.c.source == source)
                .order_by(deliveries.c.event_id, deliveries.c.received_at)
            )
        ]
    return stored, log


def test_a_batch_with_duplicates_inside_and_of_stored_rows(store: Store) -> None:
    store.ingest.record(delivery("s", "evt_old", b"old", 0))
    store.ingest.record(delivery("s", "evt_changed", b"first body", 1))
    items = [
        delivery("s", "evt_new", b"new", 2),
        delivery("s", "evt_old", b"old", 3),  # duplicate of a stored row
        delivery("s", "evt_new", b"new", 4),  # duplicate inside the batch
        delivery("s", "evt_changed", b"other body", 5),  # stored key, different body
        delivery("s", "evt_twice", b"a", 6),
        delivery("s", "evt_twice", b"b", 7),  # same key in the batch, different body
        delivery("s", "evt_changed", b"third body", 8),
    ]
    results = batch(store, items)
    summary = [(r.is_new, r.delivery_count, r.key_conflict) for r in results]
    assert summary == [
        (True, 1, False),
        (False, 2, False),
        (False, 2, False),
        (False, 2, True),
        (True, 1, False),
        (False, 2, True),
        (False, 3, True),
    ]
    assert len({r.row_id for r in results}) == 4
    assert all(r.status is Status.PENDING for r in results)
    stored = {e["event_id"]: e for e in rows(store, "s")[0]}
    assert {k: (e["delivery_count"], e["key_conflicts"]) for k, e in stored.items()} == {
        "evt_new": (2, 0),
        "evt_old": (2, 0),
        "evt_changed": (3, 2),
        "evt_twice": (2, 1),
    }
    assert stored["evt_changed"]["body"] == b"first body"  # the first body stays
    assert stored["evt_twice"]["body"] == b"a"
    assert len(rows(store, "s")[1]) == 2 + len(items)


def test_a_failed_batch_leaves_nothing(store: Store) -> None:
    items = [delivery("s", f"evt_{n}", b"x", n) for n in range(5)]
    try:
        with store.transaction() as connection:
            store.ingest.record_batch(connection, items)
            raise RuntimeError("the commit never happens")
    except RuntimeError:
        pass
    assert rows(store, "s") == ([], [])
    assert all(r.is_new for r in batch(store, items))


_sources = count()


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    plan=st.lists(
        st.tuples(
            st.sampled_from(["e1", "e2", "e3"]), st.sampled_from([b"A", b"B"]), st.booleans()
        ),
        min_size=1,
        max_size=30,
    ),
    cuts=st.lists(st.integers(min_value=1, max_value=30), max_size=5),
)
def test_batches_write_what_single_upserts_write(
    store: Store, plan: list[tuple[str, bytes, bool]], cuts: list[int]
) -> None:
    """Any sequence of deliveries, cut into batches anywhere: the same rows, log and answers
    as storing them one at a time (the ingest path without group commit)."""
    run = next(_sources)
    one, many = f"one{run}", f"many{run}"
    singles = [
        record_delivery_now(store, delivery(one, key, body, n, stale))
        for n, (key, body, stale) in enumerate(plan)
    ]
    items = [delivery(many, key, body, n, stale) for n, (key, body, stale) in enumerate(plan)]
    batched: list[RecordedDelivery] = []
    edges = sorted({0, len(items), *(c for c in cuts if c < len(items))})
    for start, end in pairwise(edges):
        batched += batch(store, items[start:end])

    def answers(results: list[RecordedDelivery]) -> list[tuple[object, ...]]:
        return [(r.is_new, r.key_conflict, r.status) for r in results]

    def counts(results: list[RecordedDelivery]) -> dict[str, list[int]]:
        """Each event's delivery counts. Inside a batch, a delivery whose body conflicts is
        counted after its siblings (deliveries that arrive together have no order)."""
        found: dict[str, list[int]] = {}
        for (key, _, _), result in zip(plan, results, strict=True):
            found.setdefault(key, []).append(result.delivery_count)
        return {key: sorted(values) for key, values in found.items()}

    assert answers(batched) == answers(singles)
    assert counts(batched) == counts(singles)
    single_rows, single_log = rows(store, one)
    batch_rows, batch_log = rows(store, many)
    for row in single_rows + batch_rows:
        row["source"] = "-"
    assert batch_rows == single_rows
    assert batch_log == single_log


def record_delivery_now(store: Store, item: NewDelivery) -> RecordedDelivery:
    with store.transaction() as connection:
        return store.ingest.record_on(connection, item)


def test_stale_rows_are_stored_stale(store: Store) -> None:
    item = dataclasses.replace(delivery("s", "evt_stale", b"x", 1), stale=True)
    (result,) = batch(store, [item])
    assert result.is_new and result.status is Status.STALE


def test_invalid_rows_are_stored_invalid_with_their_reason(store: Store) -> None:
    """An unusable event of a batch (issue 31): status `invalid`, its reason as `last_error`,
    escaped the same way by group commit's statement and by `record_delivery`."""
    reason = "no eventId in the delivery \x00 \ud800"
    item = dataclasses.replace(delivery("s", "invalid:00ff", b"[1]", 1), invalid=reason)
    (batched,) = batch(store, [item])
    single = record_delivery_now(store, dataclasses.replace(item, source="t"))
    assert batched.is_new and batched.status is Status.INVALID
    assert single.is_new and single.status is Status.INVALID
    (batch_row,), _ = rows(store, "s")
    (single_row,), _ = rows(store, "t")
    assert batch_row["last_error"] == single_row["last_error"] == safe_text(reason)
    assert {**batch_row, "source": "-"} == {**single_row, "source": "-"}
