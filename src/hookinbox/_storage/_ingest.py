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

from sqlalchemy import Connection, case
from sqlalchemy.sql.expression import Executable

from hookinbox._model import Event, NewDelivery, RecordedDelivery, Status, initial_status
from hookinbox._storage._batch import record_deliveries
from hookinbox._storage._dialects import Dialect
from hookinbox._storage._rows import event_from_row, select_events
from hookinbox._storage._schema import deliveries, events

if TYPE_CHECKING:
    from hookinbox._storage._store import Store


@functools.cache
def upsert_statement(dialect: Dialect) -> Executable:
    """Built once per dialect and executed with parameters: constructing the statement (its
    `excluded` alias above all) per request cost a quarter of ingest's CPU in a profile."""
    statement = dialect.insert(events)
    conflicting_body = case((events.c.body_sha256 != statement.excluded.body_sha256, 1), else_=0)
    statement = statement.on_conflict_do_update(
        index_elements=[events.c.source, events.c.event_id],
        set_={
            "delivery_count": events.c.delivery_count + 1,
            "key_conflicts": events.c.key_conflicts + conflicting_body,
            "last_delivery_at": statement.excluded.last_delivery_at,
        },
    )
    return statement.returning(
        events.c.id, events.c.delivery_count, events.c.body_sha256, events.c.status
    )


def _row(delivery: NewDelivery) -> dict[str, object]:
    return {
        "source": delivery.source,
        "event_id": delivery.event_id,
        "event_type": delivery.event_type,
        "occurred_at": delivery.occurred_at,
        "received_at": delivery.received_at,
        "body": delivery.body,
        "headers": json.dumps(delivery.headers, sort_keys=True),
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


_LOG_INSERT = deliveries.insert()


class Ingest:
    """Stores deliveries and reads events back, on one store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def record(self, delivery: NewDelivery) -> RecordedDelivery:
        """Store a delivery durably in its own transaction (committed on return)."""
        with self.store.transaction() as connection:
            return self.record_on(connection, delivery)

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

    def get_event(self, source: str, event_id: str) -> Event | None:
        """The event stored under (source, event_id), as it is now."""
        query = select_events().where(events.c.source == source, events.c.event_id == event_id)
        with self.store.reading() as connection:
            row = connection.execute(query).mappings().first()
        return event_from_row(row) if row else None


def _record(connection: Connection, delivery: NewDelivery, dialect: Dialect) -> RecordedDelivery:
    statement = upsert_statement(dialect)
    row = connection.execute(statement, _row(delivery)).mappings().one()
    recorded = RecordedDelivery(
        row_id=row["id"],
        is_new=row["delivery_count"] == 1,
        delivery_count=row["delivery_count"],
        key_conflict=row["body_sha256"] != delivery.body_sha256,
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
