"""Storing many deliveries with one upsert: how group commit's batch is folded and ordered.

Each dialect writes a statement's worth (`Dialect.write_batch`). PostgreSQL: ONE statement per
batch, a data-modifying CTE that upserts the events (`INSERT ... SELECT FROM
json_to_recordset(<the batch as JSON>) ON CONFLICT DO UPDATE ... RETURNING`, the bodies sliced
from one bytea) and inserts their delivery-log rows; atomic on its own, so group commit runs it
in autocommit: one round trip and one commit per batch. SQLite: the upsert as a multi-row
`VALUES` list and the log rows in a second statement, in the caller's transaction. The
statements are driver-level SQL rather than built with SQLAlchemy: compiling a multi-row
insert costs more CPU than the round trips it saves. `tests/storage/test_batch.py` checks that
batches write exactly what `record_delivery` writes, column by column, however they are cut.

Deliveries of one event inside a batch are folded into one row of the upsert (PostgreSQL
refuses to update a row twice in a statement): the first carries the count, and only it can be
new; the others are duplicates of it, as if they had arrived just after. Folded deliveries
share a body: one with a different body (a key conflict inside the batch, which is rare) goes
into a later statement, so that every conflict is counted exactly by the database. Such a
delivery is then counted after its siblings of the same batch: they arrived together, and
any order among them is one that could have happened.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from sqlalchemy import Connection

from hookinbox._model import NewDelivery, RecordedDelivery, Status, initial_status
from hookinbox._storage._payload_codec import stored_body, stored_headers
from hookinbox._text import safe_text

EVENT_COLUMNS = (
    "source, event_id, event_type, occurred_at, received_at, body, headers, body_sha256, "
    "status, attempts, deferrals, next_attempt_at, delivery_count, key_conflicts, "
    "last_delivery_at, last_error"
)
# On a conflict the stored row keeps its body; every folded delivery is counted, and when the
# (shared) body differs from the stored one, each of them is a key conflict. A statement that
# carries a conflicting body runs after the one that folded its siblings, so the latest
# delivery time is kept with GREATEST (MAX on SQLite: `latest`) rather than overwritten.
ON_CONFLICT = """
ON CONFLICT (source, event_id) DO UPDATE SET
    delivery_count = hookinbox_events.delivery_count + excluded.delivery_count,
    key_conflicts = hookinbox_events.key_conflicts + CASE
        WHEN hookinbox_events.body_sha256 <> excluded.body_sha256
            AND hookinbox_events.received_via = 'webhook'
        THEN excluded.delivery_count ELSE 0 END,
    last_delivery_at = {latest}(hookinbox_events.last_delivery_at, excluded.last_delivery_at)
RETURNING id, source, event_id, delivery_count, body_sha256, status, received_via
"""
# An event reconcile stored (`received_via = 'reconcile'`) counted no delivery: its first
# webhook brings the count to 1 without being new, and its body (the API's JSON, formatted
# otherwise) conflicts with no delivery's.

_STATUSES = {status.value: status for status in Status}
"""A stored status's member, without the enum's own lookup (about a microsecond a row)."""
headers_json = json.JSONEncoder(sort_keys=True).encode
"""`json.dumps(headers, sort_keys=True)`, as `record_delivery` writes them, without a new
encoder per call (which is what `json.dumps` builds whenever it is given an option)."""


@dataclass(frozen=True, slots=True)
class Group:
    """The deliveries of one event in one statement, folded into the one row they upsert."""

    members: list[int]
    """Their indexes in the batch, in arrival order; they share a body."""
    first: NewDelivery
    last_delivery_at: datetime


Row = tuple[int, int, str, str, bool]
"""What the upsert returns per event: id, delivery_count, body_sha256, status, and whether a
delivery stored it first (`received_via = 'webhook'`)."""


class BatchWriter(Protocol):
    def write_batch(
        self, connection: Connection, deliveries: Sequence[NewDelivery], groups: list[Group]
    ) -> dict[tuple[str, str], Row]: ...


def record_deliveries(
    connection: Connection, deliveries: Sequence[NewDelivery], writer: BatchWriter
) -> list[RecordedDelivery]:
    """Store `deliveries` with `writer` (the store's dialect); one result per delivery, in
    order.

    On PostgreSQL each statement is atomic by itself (run it in autocommit or in a
    transaction); on SQLite, call it inside a transaction.
    """
    results: list[RecordedDelivery | None] = [None] * len(deliveries)
    for groups in _statements(deliveries):
        rows = writer.write_batch(connection, deliveries, groups)
        for group in groups:
            row_id, stored_count, stored_sha, status, delivered_first = rows[key_of(group.first)]
            folded = len(group.members)
            created = was_created(stored_count, folded, delivered_first)
            for position, index in enumerate(group.members):
                results[index] = RecordedDelivery(
                    row_id=row_id,
                    is_new=created and position == 0,
                    delivery_count=stored_count - folded + position + 1,
                    key_conflict=deliveries[index].body_sha256 != stored_sha and delivered_first,
                    status=_STATUSES[status],
                )
    return [r for r in results if r is not None]


def was_created(stored_count: int, folded: int, delivered_first: bool) -> bool:
    """Whether this statement created the event: an existing row had >= 1 delivery before
    it, or was stored by reconcile (0 deliveries, but not new to any webhook)."""
    return stored_count == folded and delivered_first


def key_of(delivery: NewDelivery) -> tuple[str, str]:
    return delivery.source, delivery.event_id


def _statements(deliveries: Sequence[NewDelivery]) -> list[list[Group]]:
    """Fold the deliveries of each event; a delivery whose body differs from its event's
    first in this statement waits for the next statement (rare: a key conflict)."""
    remaining = list(range(len(deliveries)))
    statements: list[list[Group]] = []
    while remaining:
        members_of: dict[tuple[str, str], list[int]] = {}
        later: list[int] = []
        for index in remaining:
            members = members_of.setdefault(key_of(deliveries[index]), [])
            if members and deliveries[members[0]].body_sha256 != deliveries[index].body_sha256:
                later.append(index)
            else:
                members.append(index)
        # Rows in key order: two statements (two writers, two server processes) that share
        # events lock them in the same order, so they wait for each other instead of
        # deadlocking.
        statements.append(
            [
                Group(
                    members_of[key],
                    deliveries[members_of[key][0]],
                    deliveries[members_of[key][-1]].received_at,
                )
                for key in sorted(members_of)
            ]
        )
        remaining = later
    return statements


def delivery_status(delivery: NewDelivery) -> str:
    return initial_status(delivery).value


def delivery_error(delivery: NewDelivery) -> str | None:
    """An invalid event's reason, escaped as `SafeText` escapes what the single-row upsert
    writes: the batch statements bypass SQLAlchemy's column types."""
    return None if delivery.invalid is None else safe_text(delivery.invalid)


DriverTime = Callable[[datetime | None], object]
"""A time as the driver is to be handed it in driver-level SQL (SQLite: text; MariaDB: naive
UTC)."""


def upsert_parameters(groups: Sequence[Group], time: DriverTime) -> list[object]:
    """The upsert's values, a row per group in `EVENT_COLUMNS`' order (less the constants),
    for the dialects whose batch is a multi-row `VALUES` list (SQLite, MariaDB)."""
    parameters: list[object] = []
    for group in groups:
        delivery = group.first
        received = time(delivery.received_at)
        parameters += (
            delivery.source,
            delivery.event_id,
            delivery.event_type,
            time(delivery.occurred_at),
            received,
            stored_body(delivery),
            stored_headers(delivery, headers_json(delivery.headers)),
            delivery.body_sha256,
            delivery_status(delivery),
            received,
            len(group.members),
            time(group.last_delivery_at),
            delivery_error(delivery),
        )
    return parameters


def log_rows(
    deliveries: Sequence[NewDelivery],
    groups: Sequence[Group],
    rows: dict[tuple[str, str], Row],
    time: DriverTime,
) -> list[tuple[object, ...]]:
    """The delivery log's rows `(received_at, source, event_id, duplicate, key_conflict)` for
    what the upsert returned (`rows`): a group's first delivery is new only if the statement
    created the event; a conflict only against a body a delivery brought."""
    log: list[tuple[object, ...]] = []
    for group in groups:
        _, stored_count, stored_sha, _, delivered_first = rows[key_of(group.first)]
        created = was_created(stored_count, len(group.members), delivered_first)
        for position, index in enumerate(group.members):
            delivery = deliveries[index]
            log.append(
                (
                    time(delivery.received_at),
                    delivery.source,
                    delivery.event_id,
                    not (created and position == 0),
                    delivery.body_sha256 != stored_sha and delivered_first,
                )
            )
    return log
