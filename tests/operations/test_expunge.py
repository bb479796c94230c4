"""Erasure: an erased event keeps its key, status, times and delivery log and reads empty; a
redelivery is still a duplicate and stores nothing again; each erasure is audited once; a dry
run counts what the erasure erases; a payload value erases only the events that hold it; a
large match goes in bounded batches. (An erasure racing a worker process that is processing
the event: tests/processes/test_expunge_race.py.)"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from hookinbox._model import NewDelivery
from hookinbox._operations._expunge import EXPUNGE_MAX_BATCH
from hookinbox._operations._service import Operations
from hookinbox._records import Actor, Selection, search_for
from hookinbox._storage import Store
from hookinbox._storage._erasure import Erasure
from hookinbox._storage._schema import audit, deliveries, events, payloads

NOW = datetime.now(UTC)
OPS = Actor("ops", "GDPR request 42")


def delivery(event_id: str, customer: str, *, age: timedelta = timedelta(0), source: str = "stripe"
             ) -> NewDelivery:  # fmt: skip
    body = json.dumps({"id": event_id, "data": {"object": {"customer": customer}}}).encode()
    return NewDelivery(
        source=source, event_id=event_id, event_type="invoice.paid", occurred_at=None,
        received_at=NOW - age, body=body, headers={"stripe-signature": "t=1,v1=00"},
        body_sha256=hashlib.sha256(body).hexdigest(),
    )  # fmt: skip


def add(store: Store, rows: Sequence[NewDelivery]) -> None:
    for start in range(0, len(rows), 1_000):
        with store.transaction() as connection:
            store.ingest.record_batch(connection, rows[start : start + 1_000])


def kept_payloads(store: Store) -> set[str]:
    query = sa.select(events.c.event_id).join(payloads, payloads.c.id == events.c.id)
    with store.reading() as connection:
        return set(connection.execute(query).scalars())


def audited(store: Store) -> list[tuple[str, str, str, str | None]]:
    query = sa.select(audit.c.event_id, audit.c.action, audit.c.actor, audit.c.reason)
    with store.reading() as connection:
        return sorted(tuple(row) for row in connection.execute(query))


def test_an_erased_event_keeps_its_key_and_log_and_a_redelivery_is_a_duplicate(
    store: Store,
) -> None:
    add(store, [delivery("evt_1", "cus_1"), delivery("evt_2", "cus_2")])
    store.ingest.record(delivery("evt_1", "cus_1"))  # a second delivery: the log has two
    operations = Operations(store)
    before = store.get_event("stripe", "evt_1")
    assert before is not None and before.body

    assert operations.expunge_one("stripe", "evt_1", NOW, actor=None) is True  # a dry run
    assert kept_payloads(store) == {"evt_1", "evt_2"}
    assert operations.expunge_one("stripe", "evt_1", NOW, actor=OPS) is True
    assert operations.expunge_one("stripe", "evt_1", NOW, actor=OPS) is False  # already
    assert operations.expunge_one("stripe", "evt_none", NOW, actor=OPS) is None

    after = store.get_event("stripe", "evt_1")
    assert after is not None
    assert (after.body, after.headers) == (b"", {})
    assert (after.status, after.received_at, after.type, after.delivery_count) == (
        before.status, before.received_at, before.type, before.delivery_count,
    )  # fmt: skip
    assert kept_payloads(store) == {"evt_2"}
    assert audited(store) == [("evt_1", "expunge", "ops", "GDPR request 42")]

    again = store.ingest.record(delivery("evt_1", "cus_1"))
    assert not again.is_new and not again.key_conflict and again.delivery_count == 3
    assert kept_payloads(store) == {"evt_2"}  # nothing stored again
    with store.reading() as connection:
        log = connection.execute(
            sa.select(deliveries.c.duplicate).where(deliveries.c.event_id == "evt_1")
        ).scalars()
        assert sorted(log) == [False, True, True]
    record = operations.event_record("stripe", "evt_1")
    assert record is not None and [row["action"] for row in record.audit] == ["expunge"]


def test_by_age_the_dry_run_counts_what_the_erasure_erases(store: Store) -> None:
    add(store, [
        delivery("evt_old_1", "cus_1", age=timedelta(days=40)),
        delivery("evt_old_2", "cus_2", age=timedelta(days=31)),
        delivery("evt_new", "cus_3", age=timedelta(days=2)),
        delivery("evt_old_gh", "cus_1", age=timedelta(days=40), source="github"),
    ])  # fmt: skip
    operations = Operations(store)
    selection = Selection("stripe", before=NOW - timedelta(days=30))

    counted = sum(operations.expunge_matching(selection, NOW, actor=None))
    assert kept_payloads(store) == {"evt_old_1", "evt_old_2", "evt_new", "evt_old_gh"}
    erased = sum(operations.expunge_matching(selection, NOW, actor=OPS))

    assert counted == erased == 2
    assert kept_payloads(store) == {"evt_new", "evt_old_gh"}
    assert [row[0] for row in audited(store)] == ["evt_old_1", "evt_old_2"]
    assert sum(operations.expunge_matching(selection, NOW, actor=None)) == 0  # none left
    assert sum(operations.expunge_matching(selection, NOW, actor=OPS)) == 0
    assert len(audited(store)) == 2  # audited once


def test_by_payload_value_only_the_events_holding_it_are_erased(store: Store) -> None:
    add(store, [
        delivery("evt_a", "cus_1"),
        delivery("evt_b", "cus_2"),
        delivery("evt_c", "cus_1", age=timedelta(days=400)),
        delivery("evt_d", "cus_10"),
        delivery("evt_gh", "cus_1", source="github"),
    ])  # fmt: skip
    operations = Operations(store)
    selection = Selection("stripe", payload=search_for("data.object.customer", "cus_1"))

    counted = sum(operations.expunge_matching(selection, NOW, actor=None))
    erased = sum(operations.expunge_matching(selection, NOW, actor=OPS))

    assert counted == erased == 2
    assert kept_payloads(store) == {"evt_b", "evt_d", "evt_gh"}
    assert [row[0] for row in audited(store)] == ["evt_a", "evt_c"]


class Observed(Erasure):
    """The store's erasure gateway, recording each erasure transaction's size."""

    def __init__(self, store: Store) -> None:
        super().__init__(store, store.operator)
        self.transactions: list[int] = []

    def erase(self, ids: Sequence[int], now: datetime, actor: Actor) -> list[int]:
        erased = super().erase(ids, now, actor)
        self.transactions.append(len(erased))
        return erased


def test_a_large_payload_match_is_erased_in_bounded_batches(store: Store) -> None:
    """3,000 matches among 4,000 events: every transaction erases at most
    `EXPUNGE_MAX_BATCH`, each erased event is audited, the others are left alone."""
    rows = [delivery(f"evt_{n}", "cus_big" if n % 4 else "cus_other") for n in range(4_000)]
    add(store, rows)
    observed = Observed(store)
    store.erasure = observed
    operations = Operations(store)
    selection = Selection("stripe", payload=search_for("data.object.customer", "cus_big"))

    counted = sum(operations.expunge_matching(selection, NOW, actor=None))
    erased = sum(operations.expunge_matching(selection, NOW, actor=OPS))

    assert counted == erased == 3_000
    assert max(observed.transactions) <= EXPUNGE_MAX_BATCH
    assert len(observed.transactions) >= 4_000 // EXPUNGE_MAX_BATCH
    assert len(kept_payloads(store)) == 1_000
    assert len(audited(store)) == 3_000
