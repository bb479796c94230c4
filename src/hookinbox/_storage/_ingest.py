"""The ingest gateway (`Store.ingest`): storing deliveries, one or a batch, and reading one back.

A delivery is stored with one atomic upsert, never a look-up followed by an insert.

`INSERT ... ON CONFLICT (source, event_id) DO UPDATE` either creates the event or counts one more
delivery of it, in a single statement that concurrent duplicates cannot both win: the unique
index decides. The returned `delivery_count` tells which happened (1 means this delivery created
the row), and the stored body hash, compared with ours, reveals a key conflict. A second,
append-only insert logs the delivery itself (for the duplicate ratio and the audit trail). A new
event's queue row is made by a trigger on insert (`hookinbox_event_queue`, schema 9): no
statement more here, whoever inserts.

Group commit's batches go through `record_batch` (`_batch.py` folds and orders them; the
dialect writes each statement).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy import Connection, case
from sqlalchemy.sql.expression import Executable

from hookinbox._model import Event, NewDelivery, RecordedDelivery, Status, initial_status
from hookinbox._storage._batch import record_deliveries
from hookinbox._storage._dialects import Dialect
from hookinbox._storage._payload_codec import stored_body, stored_headers
from hookinbox._storage._rows import event_from_row, select_events
from hookinbox._storage._schema import (
    RECEIVED_VIA_RECONCILE,
    RECEIVED_VIA_WEBHOOK,
    deliveries,
    events,
)

if TYPE_CHECKING:
    from hookinbox._storage._seam import StoreSeam


@functools.cache
def upsert_statement(dialect: Dialect) -> Executable:
    """Built once per dialect and executed with parameters: constructing the statement (its
    `excluded` alias above all) per request cost a quarter of ingest's CPU in a profile."""
    statement = dialect.insert(events)
    # A body stored by reconcile is the API's JSON, whose formatting differs from the webhook's
    # bytes: only a body that came as a delivery can conflict with one.
    conflicting_body = case(
        (
            (events.c.body_sha256 != statement.excluded.body_sha256)
            & (events.c.received_via == RECEIVED_VIA_WEBHOOK),
            1,
        ),
        else_=0,
    )
    statement = statement.on_conflict_do_update(
        index_elements=[events.c.source, events.c.event_id],
        set_={
            "delivery_count": events.c.delivery_count + 1,
            "key_conflicts": events.c.key_conflicts + conflicting_body,
            "last_delivery_at": statement.excluded.last_delivery_at,
        },
    )
    return statement.returning(
        events.c.id,
        events.c.delivery_count,
        events.c.body_sha256,
        events.c.status,
        events.c.received_via,
    )


@functools.cache
def reconciled_insert(dialect: Dialect) -> Executable:
    """Insert an event that a provider's API listed, or nothing when its key is stored: the
    unique index decides, as for deliveries, so a webhook committing at the same moment makes
    this one find the event stored (and the webhook, when it comes second, a duplicate)."""
    statement = dialect.insert(events).on_conflict_do_nothing(
        index_elements=[events.c.source, events.c.event_id]
    )
    return statement.returning(events.c.id)


def _row(delivery: NewDelivery) -> dict[str, object]:
    return {
        "source": delivery.source,
        "event_id": delivery.event_id,
        "event_type": delivery.event_type,
        "occurred_at": delivery.occurred_at,
        "received_at": delivery.received_at,
        "body": stored_body(delivery),
        "headers": stored_headers(delivery, json.dumps(delivery.headers, sort_keys=True)),
        "body_sha256": delivery.body_sha256,
        "status": initial_status(delivery).value,
        "last_error": delivery.invalid,
        "attempts": 0,
        "deferrals": 0,
        "next_attempt_at": delivery.received_at,
        "delivery_count": 1,
        "key_conflicts": 0,
        "last_delivery_at": delivery.received_at,
    }


def _reconciled_row(event: NewDelivery) -> dict[str, object]:
    # No delivery: none counted, none logged; the first webhook of it will count 1.
    return {**_row(event), "delivery_count": 0, "received_via": RECEIVED_VIA_RECONCILE}


_LOG_INSERT = deliveries.insert()
INGEST = "ingest"
"""The operation named in the deadlock retries' log lines and counter."""


class Ingest:
    """Stores deliveries and reads events back, on one store."""

    def __init__(self, store: StoreSeam) -> None:
        self.store = store

    def record(self, delivery: NewDelivery) -> RecordedDelivery:
        """Store a delivery durably in its own transaction (committed on return; run again
        if a deadlock chose it as the victim)."""

        def write() -> RecordedDelivery:
            with self.store.transaction() as connection:
                return self.record_on(connection, delivery)

        return self.store.retry_deadlocks(write, INGEST)

    def record_on(self, connection: Connection, delivery: NewDelivery) -> RecordedDelivery:
        """Store a delivery in the caller's transaction (inline mode, a batch's fallback)."""
        return _record(connection, delivery, self.store.dialect)

    def record_batch(
        self, connection: Connection, deliveries: Sequence[NewDelivery]
    ) -> list[RecordedDelivery]:
        """Store `deliveries` in as few statements as their keys allow; one result each, in
        order. Each statement is atomic on its own where the dialect's batches autocommit;
        otherwise call it inside a transaction."""
        return record_deliveries(connection, deliveries, self.store.dialect)

    def record_reconciled(self, events_found: Sequence[NewDelivery]) -> list[bool]:
        """Store the events a provider's API listed that no delivery stored, in one
        transaction (reconcile's page); for each, whether this call stored it. A reconciled
        event is queued like a delivered one (the insert trigger) and processed as usual."""
        statement = reconciled_insert(self.store.dialect)
        # In key order, as group commit writes its batches: a webhook batch and this page that
        # share events then wait for each other instead of deadlocking (PostgreSQL).
        order = sorted(range(len(events_found)), key=lambda i: events_found[i].event_id)

        def write() -> list[bool]:
            stored = [False] * len(events_found)
            with self.store.transaction() as connection:
                for index in order:
                    row = _reconciled_row(events_found[index])
                    stored[index] = connection.execute(statement, row).first() is not None
            return stored

        return self.store.retry_deadlocks(write, "reconcile")

    def stored_keys(self, source: str, event_ids: Sequence[str]) -> set[str]:
        """Those of `event_ids` stored under `source` (reconcile's dry run: a read, no lock)."""
        if not event_ids:
            return set()
        query = sa.select(events.c.event_id).where(
            events.c.source == source, events.c.event_id.in_(list(event_ids))
        )
        with self.store.reading() as connection:
            return set(connection.execute(query).scalars())

    def get_event(self, source: str, event_id: str) -> Event | None:
        """The event stored under (source, event_id), as it is now."""
        query = select_events().where(events.c.source == source, events.c.event_id == event_id)
        with self.store.reading() as connection:
            row = connection.execute(query).mappings().first()
        return event_from_row(row) if row else None


def _record(connection: Connection, delivery: NewDelivery, dialect: Dialect) -> RecordedDelivery:
    dialect.check_row_size(connection, delivery)
    statement = upsert_statement(dialect)
    row = connection.execute(statement, _row(delivery)).mappings().one()
    delivered_first = row["received_via"] == RECEIVED_VIA_WEBHOOK
    recorded = RecordedDelivery(
        row_id=row["id"],
        is_new=row["delivery_count"] == 1 and delivered_first,
        delivery_count=row["delivery_count"],
        key_conflict=row["body_sha256"] != delivery.body_sha256 and delivered_first,
        status=Status(row["status"]),
    )
    connection.execute(
        _LOG_INSERT,
        {
            "source": delivery.source,
            "event_id": delivery.event_id,
            "received_at": delivery.received_at,
            "duplicate": not recorded.is_new,
            "key_conflict": recorded.key_conflict,
        },
    )
    return recorded
