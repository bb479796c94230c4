"""Storing many deliveries with one upsert: the statement behind group commit.

The rows of a batch go to the database in ONE `INSERT ... ON CONFLICT DO UPDATE ... RETURNING`
(PostgreSQL: `SELECT ... FROM unnest(<one array per column>)`, so the statement text never
changes and the server keeps it prepared; SQLite: a multi-row `VALUES` list, one text per row
count) and their delivery-log rows in a second statement, inside the caller's transaction.

The statements are written as driver-level SQL rather than built with SQLAlchemy: compiling a
multi-row insert costs more CPU than the round trips it saves. `tests/storage` checks that a
batch writes exactly what `record_delivery` writes, column by column.

Deliveries of the same event inside one batch are folded before the upsert (PostgreSQL refuses
to update one row twice in a statement): the event's first delivery carries the group's count,
and only it can be new; the others are duplicates of it, as if they had arrived just after.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Connection

from hookinbox._model import NewDelivery, RecordedDelivery, Status

_EVENT_COLUMNS = (
    "source, event_id, event_type, occurred_at, received_at, body, headers, body_sha256, "
    "status, attempts, deferrals, next_attempt_at, delivery_count, key_conflicts, "
    "last_delivery_at"
)
# On a conflict the stored row keeps its body; each delivery of the group is counted, and a body
# that differs from the stored one is a key conflict. The CASE counts the group's first delivery;
# `_fix_conflicts` adds the rest in the rare case they differ.
_ON_CONFLICT = """
ON CONFLICT (source, event_id) DO UPDATE SET
    delivery_count = hookinbox_events.delivery_count + excluded.delivery_count,
    key_conflicts = hookinbox_events.key_conflicts
        + CASE WHEN hookinbox_events.body_sha256 <> excluded.body_sha256 THEN 1 ELSE 0 END,
    last_delivery_at = excluded.last_delivery_at
RETURNING id, source, event_id, delivery_count, body_sha256, status
"""
_POSTGRES_UPSERT = f"""
INSERT INTO hookinbox_events ({_EVENT_COLUMNS})
SELECT source, event_id, event_type, occurred_at, received_at, body, headers, body_sha256,
       status, 0, 0, received_at, delivery_count, key_conflicts, last_delivery_at
FROM unnest(
    %(source)s::varchar[], %(event_id)s::varchar[], %(event_type)s::varchar[],
    %(occurred_at)s::timestamptz[], %(received_at)s::timestamptz[], %(body)s::bytea[],
    %(headers)s::text[], %(body_sha256)s::varchar[], %(status)s::varchar[],
    %(delivery_count)s::int[], %(key_conflicts)s::int[], %(last_delivery_at)s::timestamptz[]
) AS batch(source, event_id, event_type, occurred_at, received_at, body, headers, body_sha256,
           status, delivery_count, key_conflicts, last_delivery_at)
{_ON_CONFLICT}"""
_POSTGRES_LOG = """
INSERT INTO hookinbox_deliveries (source, event_id, received_at, duplicate, key_conflict)
SELECT * FROM unnest(%(source)s::varchar[], %(event_id)s::varchar[],
                     %(received_at)s::timestamptz[], %(duplicate)s::boolean[],
                     %(key_conflict)s::boolean[])
"""
_SQLITE_LOG = (
    "INSERT INTO hookinbox_deliveries (source, event_id, received_at, duplicate, key_conflict) "
    "VALUES (?, ?, ?, ?, ?)"
)
_FIX_CONFLICTS = "UPDATE hookinbox_events SET key_conflicts = key_conflicts + {n} WHERE id = {id}"


@functools.lru_cache(maxsize=64)
def _sqlite_upsert(rows: int) -> str:
    values = ", ".join(["(?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 0, ?, ?, ?, ?)"] * rows)
    return f"INSERT INTO hookinbox_events ({_EVENT_COLUMNS}) VALUES {values}{_ON_CONFLICT}"


def _sqlite_time(value: datetime | None) -> str | None:
    """The text SQLAlchemy's SQLite DateTime writes (naive UTC, always with microseconds), so
    rows from a batch sort and compare with every other row."""
    if value is None:
        return None
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


@dataclass(frozen=True, slots=True)
class _Group:
    """The deliveries of one event inside a batch, folded into the one row they upsert."""

    first: NewDelivery
    count: int
    fresh_conflicts: int
    """If the row is new: its later deliveries whose body differs from the first's."""
    last_delivery_at: datetime


Row = tuple[int, int, str, str]
"""What the upsert returns per event: id, delivery_count, body_sha256, status."""


def record_deliveries(
    connection: Connection, deliveries: Sequence[NewDelivery]
) -> list[RecordedDelivery]:
    """Store `deliveries` in the caller's transaction; one result per delivery, in order."""
    members_of: dict[tuple[str, str], list[int]] = {}
    for index, delivery in enumerate(deliveries):
        members_of.setdefault((delivery.source, delivery.event_id), []).append(index)
    groups = [
        _Group(
            first=deliveries[m[0]],
            count=len(m),
            fresh_conflicts=sum(
                deliveries[i].body_sha256 != deliveries[m[0]].body_sha256 for i in m[1:]
            ),
            last_delivery_at=deliveries[m[-1]].received_at,
        )
        for m in members_of.values()
    ]
    upsert = _upsert_postgres if connection.dialect.name == "postgresql" else _upsert_sqlite
    rows = upsert(connection, groups)

    results: list[RecordedDelivery | None] = [None] * len(deliveries)
    for (key, members), group in zip(members_of.items(), groups, strict=True):
        row_id, stored_count, stored_sha, status = rows[key]
        created = stored_count == group.count  # an existing row had >= 1 before the batch
        for position, index in enumerate(members):
            results[index] = RecordedDelivery(
                row_id=row_id,
                is_new=created and position == 0,
                delivery_count=stored_count - group.count + position + 1,
                key_conflict=deliveries[index].body_sha256 != stored_sha,
                status=Status(status),
            )
        if not created:
            extra = sum(deliveries[i].body_sha256 != stored_sha for i in members[1:])
            if extra:
                connection.exec_driver_sql(_FIX_CONFLICTS.format(n=int(extra), id=int(row_id)))
    recorded = [r for r in results if r is not None]
    _log(connection, deliveries, recorded)
    return recorded


def _upsert_postgres(connection: Connection, groups: list[_Group]) -> dict[tuple[str, str], Row]:
    firsts = [g.first for g in groups]
    parameters = {
        "source": [d.source for d in firsts],
        "event_id": [d.event_id for d in firsts],
        "event_type": [d.event_type for d in firsts],
        "occurred_at": [d.occurred_at for d in firsts],
        "received_at": [d.received_at for d in firsts],
        "body": [d.body for d in firsts],
        "headers": [json.dumps(d.headers, sort_keys=True) for d in firsts],
        "body_sha256": [d.body_sha256 for d in firsts],
        "status": [_status(d) for d in firsts],
        "delivery_count": [g.count for g in groups],
        "key_conflicts": [g.fresh_conflicts for g in groups],
        "last_delivery_at": [g.last_delivery_at for g in groups],
    }
    result = connection.exec_driver_sql(_POSTGRES_UPSERT, parameters)
    return {(r[1], r[2]): (r[0], r[3], r[4], r[5]) for r in result}


def _upsert_sqlite(connection: Connection, groups: list[_Group]) -> dict[tuple[str, str], Row]:
    parameters: list[object] = []
    for group in groups:
        delivery = group.first
        received = _sqlite_time(delivery.received_at)
        parameters += (
            delivery.source,
            delivery.event_id,
            delivery.event_type,
            _sqlite_time(delivery.occurred_at),
            received,
            delivery.body,
            json.dumps(delivery.headers, sort_keys=True),
            delivery.body_sha256,
            _status(delivery),
            received,
            group.count,
            group.fresh_conflicts,
            _sqlite_time(group.last_delivery_at),
        )
    result = connection.exec_driver_sql(_sqlite_upsert(len(groups)), tuple(parameters))
    return {(r[1], r[2]): (r[0], r[3], r[4], r[5]) for r in result}


def _log(
    connection: Connection, deliveries: Sequence[NewDelivery], recorded: list[RecordedDelivery]
) -> None:
    if connection.dialect.name == "postgresql":
        connection.exec_driver_sql(
            _POSTGRES_LOG,
            {
                "source": [d.source for d in deliveries],
                "event_id": [d.event_id for d in deliveries],
                "received_at": [d.received_at for d in deliveries],
                "duplicate": [not r.is_new for r in recorded],
                "key_conflict": [r.key_conflict for r in recorded],
            },
        )
        return
    connection.exec_driver_sql(
        _SQLITE_LOG,
        [
            (d.source, d.event_id, _sqlite_time(d.received_at), not r.is_new, r.key_conflict)
            for d, r in zip(deliveries, recorded, strict=True)
        ],
    )


def _status(delivery: NewDelivery) -> str:
    return (Status.STALE if delivery.stale else Status.PENDING).value
