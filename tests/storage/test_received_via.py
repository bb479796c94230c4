"""Events a provider's API listed (`hookinbox reconcile`): stored once, counted as no delivery,
and a later webhook of them a plain duplicate, through the single upsert and group commit's."""

from __future__ import annotations

import sqlalchemy as sa

from hookinbox._model import NewDelivery, Status
from hookinbox._storage import Store
from hookinbox._storage._schema import deliveries
from tests.storage.test_deliveries import delivery


def event(event_id: str, body: bytes) -> NewDelivery:
    return delivery(event_id, body, headers={})


API_JSON = b'{\n  "id": "evt_1",\n  "type": "invoice.paid"\n}'
WEBHOOK = b'{"id":"evt_1","type":"invoice.paid"}'


def log_rows(store: Store) -> list[tuple[bool, bool]]:
    with store.engine.connect() as connection:
        query = sa.select(deliveries.c.duplicate, deliveries.c.key_conflict)
        return [(row[0], row[1]) for row in connection.execute(query)]


def test_a_reconciled_event_is_pending_with_no_delivery(store: Store) -> None:
    assert store.ingest.record_reconciled([event("evt_1", API_JSON)]) == [True]
    stored = store.get_event("stripe", "evt_1")
    assert stored is not None
    assert stored.received_via == "reconcile" and stored.status is Status.PENDING
    assert stored.delivery_count == 0 and log_rows(store) == []


def test_a_second_reconcile_stores_nothing(store: Store) -> None:
    store.ingest.record_reconciled([event("evt_1", API_JSON)])
    assert store.ingest.record_reconciled([event("evt_1", API_JSON), event("evt_2", b"{}")]) == [
        False,
        True,
    ]


def test_a_delivered_event_is_not_reconciled_again(store: Store) -> None:
    store.ingest.record(event("evt_1", WEBHOOK))
    assert store.ingest.record_reconciled([event("evt_1", API_JSON)]) == [False]
    stored = store.get_event("stripe", "evt_1")
    assert stored is not None and stored.received_via == "webhook" and stored.delivery_count == 1


def test_a_webhook_after_reconcile_is_a_plain_duplicate(store: Store) -> None:
    store.ingest.record_reconciled([event("evt_1", API_JSON)])
    recorded = store.ingest.record(event("evt_1", WEBHOOK))
    assert not recorded.is_new and not recorded.key_conflict and recorded.delivery_count == 1
    stored = store.get_event("stripe", "evt_1")
    assert stored is not None
    assert stored.received_via == "reconcile" and stored.key_conflicts == 0
    assert stored.body == API_JSON  # the first arrival's
    assert log_rows(store) == [(True, False)]


def test_a_webhook_batch_after_reconcile_is_a_plain_duplicate(store: Store) -> None:
    store.ingest.record_reconciled([event("evt_1", API_JSON)])
    twice = [event("evt_1", WEBHOOK), event("evt_1", WEBHOOK), event("evt_2", WEBHOOK)]
    with store.transaction() as connection:
        results = store.ingest.record_batch(connection, twice)
    assert [(r.is_new, r.key_conflict, r.delivery_count) for r in results] == [
        (False, False, 1),
        (False, False, 2),
        (True, False, 1),
    ]
    stored = store.get_event("stripe", "evt_1")
    assert stored is not None and stored.key_conflicts == 0 and stored.delivery_count == 2
    assert sorted(log_rows(store)) == [(False, False), (True, False), (True, False)]


def test_a_different_body_after_a_webhook_is_still_a_key_conflict(store: Store) -> None:
    store.ingest.record(event("evt_1", WEBHOOK))
    other = event("evt_1", API_JSON)
    assert store.ingest.record(other).key_conflict
    with store.transaction() as connection:
        (batched,) = store.ingest.record_batch(connection, [other])
    assert batched.key_conflict
